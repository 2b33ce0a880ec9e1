#include "runner/runner.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  return stoker::runner::ShimMain(argv[argc - 1]);
}
