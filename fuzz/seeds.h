// Each fuzz target's seed corpus: valid small files made by the project's own writers (the files
// tests/io/test_hostile_bytes.cpp mutates), written into <corpus>/<reader>/ for every reader that
// has a target (fuzz/fuzz_<reader>.cpp). Used by hfta_fuzz_seeds (fuzz/run.sh) and by each
// target's replay test (fuzz/replay_main.cpp).
#pragma once

#include <filesystem>

namespace hfta::fuzz {

void write_seeds(const std::filesystem::path& corpus);

}  // namespace hfta::fuzz
