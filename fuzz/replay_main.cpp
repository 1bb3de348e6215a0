// A fuzz target without libFuzzer: fuzz_<reader>_replay links fuzz/fuzz_<reader>.cpp with this
// main, so every build (any compiler, sanitizers or not) runs the target's own code in ctest.
//
//   fuzz_<reader>_replay                   # the seed corpus (fuzz/seeds.h) and 2000 seeded
//                                          # mutations of each seed (tests/io/mutate.h)
//   fuzz_<reader>_replay FILE|DIR...       # also these inputs (a libFuzzer corpus, a finding)
//   HFTA_FUZZ_ITERS=n                      # mutations per seed
//   HFTA_FUZZ_SEED=s                       # only mutation s of each seed
//
// An input that crashes, hangs (10 s), throws anything but hfta::Error out of the target, or
// grows the peak memory by more than 256 MiB stops the run, printing the input or the mutation
// (its seed reproduces it alone).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/seeds.h"
#include "tests/io/crash_report.h"
#include "tests/io/mutate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace hfta::fuzz {

// The reader's name (`checkpoint` in fuzz_checkpoint_replay), from a file CMakeLists.txt
// generates per replay executable, so that this file compiles once for all of them.
extern const char* const kReplayedReader;

namespace {

namespace fs = std::filesystem;

constexpr int64_t kDefaultMutations = 2000;
constexpr int64_t kMaxGrowthBytes = int64_t{256} << 20;

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t{u.ru_maxrss} * 1024;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs the target on `bytes`, described by `what` should it die.
void run_one(const std::string& bytes, const std::string& what) {
  std::snprintf(hostile::g_current, sizeof hostile::g_current, "%s", what.c_str());
  const int64_t before = peak_rss_bytes();
  ::alarm(10);
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ::alarm(0);
  if (peak_rss_bytes() - before > kMaxGrowthBytes) {
    std::fprintf(stderr, "%s: the read grew the peak memory by %lld MiB\n", what.c_str(),
                 static_cast<long long>((peak_rss_bytes() - before) >> 20));
    std::exit(1);
  }
}

// Every regular file under `path` (or `path` itself), sorted for a stable order.
std::vector<fs::path> files_under(const fs::path& path) {
  std::vector<fs::path> out;
  if (fs::is_directory(path)) {
    for (const auto& entry : fs::recursive_directory_iterator(path))
      if (entry.is_regular_file()) out.push_back(entry.path());
  } else if (fs::is_regular_file(path)) {
    out.push_back(path);
  } else {
    std::fprintf(stderr, "%s: no such file or directory\n", path.c_str());
    std::exit(2);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::max<int64_t>(1, std::atoll(v)) : fallback;
}

int replay(int argc, char** argv) {
  hostile::install_crash_report();
  const std::string reader = kReplayedReader;
  const fs::path seeds_root = fs::path(temp_dir()) / "seeds";
  write_seeds(seeds_root);
  const std::vector<fs::path> seeds = files_under(seeds_root / reader);
  if (seeds.empty()) {
    std::fprintf(stderr, "no seeds for reader %s\n", reader.c_str());
    return 1;
  }
  int64_t inputs = 0;
  for (int i = 1; i < argc; ++i)
    for (const fs::path& file : files_under(argv[i])) {
      run_one(read_bytes(file), "input " + file.string());
      ++inputs;
    }
  const char* only = std::getenv("HFTA_FUZZ_SEED");
  const int64_t mutations = only ? 1 : env_int("HFTA_FUZZ_ITERS", kDefaultMutations);
  // Mutation seeds differ per reader (FNV-1a of its name), so two targets explore differently.
  uint64_t base = 0xcbf29ce484222325ull;
  for (char c : reader) base = (base ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  base %= 1000000000000ull;
  for (const fs::path& seed_path : seeds) {
    hostile::SeedFile seed{.name = seed_path.filename().string(), .bytes = read_bytes(seed_path)};
    seed.boundaries = {0, seed.bytes.size()};
    seed.text_end = seed.bytes.size();
    run_one(seed.bytes, "seed " + seed.name);
    ++inputs;
    for (int64_t m = 0; m < mutations; ++m) {
      const uint64_t mutation_seed = only ? std::strtoull(only, nullptr, 10) : base + m;
      std::string what;
      const std::string bytes = hostile::mutate(seed, mutation_seed, what);
      run_one(bytes, "mutation " + std::to_string(mutation_seed) + " of seed " + seed.name +
                         " (HFTA_FUZZ_SEED=" + std::to_string(mutation_seed) + "): " + what);
      ++inputs;
    }
  }
  std::printf("fuzz_%s replay: %lld inputs (%zu seeds, %lld mutations each), no finding\n",
              reader.c_str(), static_cast<long long>(inputs), seeds.size(),
              static_cast<long long>(mutations));
  return 0;
}

}  // namespace
}  // namespace hfta::fuzz

int main(int argc, char** argv) {
  try {
    return hfta::fuzz::replay(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\nwhile reading %s\n", argv[0], e.what(), hfta::hostile::g_current);
    return 1;
  }
}
