// The `stoker` program: the short client commands over plain HTTP; every other command runs in
// stoker-full beside it (src/cli/programs.h). Each subcommand lives in src/cli/.
#include "cli/programs.h"

int main(int argc, char** argv) { return stoker::cli::ClientMain(argc, argv); }
