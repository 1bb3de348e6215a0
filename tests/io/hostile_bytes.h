// The replay loop of the hostile-bytes tests: each seeded mutation of a seed file
// (tests/io/mutate.h) read under a time and memory watch. Included by test files alone (its
// helpers live in an unnamed namespace).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string_view>
#include <typeinfo>

#include "datasets/cifar10.h"
#include "datasets/idx.h"
#include "io/checkpoint.h"
#include "io/csv.h"
#include "io/safetensors.h"
#include "test_files.h"
#include "test_util.h"
#include "tests/io/crash_report.h"
#include "tests/io/mutate.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;

// Field, SeedFile, mutate (tests/io/mutate.h); g_current, install_crash_report
// (tests/io/crash_report.h).
using namespace hostile;

// --- the replay loop --------------------------------------------------------------------------

int64_t fuzz_iters() {
  const char* env = std::getenv("HFTA_FUZZ_ITERS");
  return env ? std::max<int64_t>(1, std::atoll(env)) : 4000;
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t{u.ru_maxrss} * 1024;
}

// A new file each time: ext4 flushes a file truncated and rewritten in place at its close, which
// made the loop wait on the disk.
void write_bytes(const std::string& path, std::string_view bytes) {
  fs::remove(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

[[maybe_unused]] std::string gzip(std::string_view bytes) {
  uLongf size = compressBound(bytes.size()) + 32;
  std::string out(size, '\0');
  z_stream z{};
  // windowBits 15 + 16: a gzip wrapper, as gzopen writes it.
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

struct Tally {
  int64_t read = 0, refused = 0, changed_but_read = 0;
  double seconds = 0;
};

// What a mutation becomes before it is written: gzip-compressed, or given a valid checksum, so
// that the reader's later checks meet the damage too.
using Encode = std::function<std::string(const std::string&)>;

// Writes each mutation of `seed` to `path` (passed through `encode` first, if given) and calls
// `read`, which must succeed or throw hfta::Error naming `path`.
Tally replay(const std::string& reader, const SeedFile& seed, const std::string& path,
             const std::function<void()>& read, const Encode& encode = {}) {
  install_crash_report();
  Tally tally;
  const auto start = std::chrono::steady_clock::now();
  const char* only = std::getenv("HFTA_FUZZ_SEED");
  const uint64_t base = test::case_seed(reader + "/" + seed.name);
  const int64_t iters = only ? 1 : fuzz_iters();
  const std::string rerun = test::reproduce_command();  // "reproduce: HFTA_TEST_SEED=..."
  const std::string rerun_rest = rerun.substr(rerun.find(':') + 1);
  for (int64_t i = 0; i < iters; ++i) {
    const uint64_t mutation_seed = only ? std::strtoull(only, nullptr, 10) : base + i;
    std::string what;
    const std::string bytes = mutate(seed, mutation_seed, what);
    write_bytes(path, encode ? encode(bytes) : bytes);
    const std::string where =
        fmt::format("{} mutation {} of {}: {}", reader, mutation_seed, seed.name, what);
    SCOPED_TRACE(fmt::format("{}\n  reproduce alone: HFTA_FUZZ_SEED={}{}", where, mutation_seed,
                             rerun_rest));
    std::snprintf(g_current, sizeof g_current, "%s (HFTA_FUZZ_SEED=%llu)", where.c_str(),
                  static_cast<unsigned long long>(mutation_seed));
    const int64_t rss = peak_rss_bytes();
    ::alarm(10);
    try {
      read();
      ++tally.read;
      if (bytes != seed.bytes) ++tally.changed_but_read;
    } catch (const Error& e) {
      ++tally.refused;
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos)
          << "the error does not name the file: " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw " << typeid(e).name() << ", not hfta::Error: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "threw something that is not a std::exception";
    }
    ::alarm(0);
    EXPECT_LE(peak_rss_bytes() - rss, int64_t{64} << 20) << "the read grew the peak memory";
    if (::testing::Test::HasFailure()) break;  // the first failing mutation is the one to read
  }
  std::snprintf(g_current, sizeof g_current, "nothing");
  tally.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ hostile  ] %s %s: %lld mutations, %lld read, %lld refused (%.2f s)\n",
              reader.c_str(), seed.name.c_str(), static_cast<long long>(tally.read + tally.refused),
              static_cast<long long>(tally.read), static_cast<long long>(tally.refused),
              tally.seconds);
  return tally;
}

// An hfta::Error naming `path` and each of `parts`, thrown within a second, and a peak memory
// that grew by at most 64 MiB.
void expect_quick_refusal(const std::function<void()>& read, const std::string& path,
                          const std::vector<std::string>& parts) {
  const int64_t rss = peak_rss_bytes();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> all = parts;
  all.push_back(path);
  test::expect_error_containing_all(read, all);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  EXPECT_LE(peak_rss_bytes() - rss, int64_t{64} << 20) << "the refusal grew the peak memory";
}

}  // namespace
}  // namespace hfta
