// hfta_fuzz_seeds <corpus>: writes each fuzz target's seed corpus into <corpus>/<reader>/
// (fuzz/seeds.h). fuzz/run.sh calls it.
#include <cstdio>
#include <exception>

#include "fuzz/seeds.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hfta_fuzz_seeds <corpus directory>\n");
    return 2;
  }
  try {
    hfta::fuzz::write_seeds(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hfta_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
