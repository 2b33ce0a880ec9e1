// stoker-full: every `stoker` command, with TLS (src/cli/programs.h). `stoker` runs it, from its
// own directory, for the commands it does not keep and for a client command over HTTPS.
#include "cli/cli.h"

int main(int argc, char** argv) { return stoker::cli::Main(argc, argv); }
