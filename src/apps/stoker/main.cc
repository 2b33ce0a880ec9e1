// The `stoker` binary: wiring only. Each subcommand lives in src/cli/.
#include "cli/cli.h"

int main(int argc, char** argv) { return stoker::cli::Main(argc, argv); }
