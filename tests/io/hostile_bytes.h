// The mutation engine of test_hostile_bytes.cpp: seed files with their fields and boundaries,
// seeded mutations of them, and the replay loop that reads each mutation under a time and memory
// watch. Included by that test alone (its helpers live in an unnamed namespace).
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

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HFTA_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HFTA_TEST_ASAN 1
#endif
#ifdef HFTA_TEST_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace hfta {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::TempDir;

// --- the mutation being read, for a crash or a hang (gtest cannot print those) -----------------

char g_current[512] = "no mutation";

void print_current() {
  const char head[] = "\nhostile bytes: the process died while reading ";
  [[maybe_unused]] ssize_t n = ::write(2, head, sizeof head - 1);
  n = ::write(2, g_current, std::strlen(g_current));
  n = ::write(2, "\n", 1);
}

void die_printing_current(int sig) {
  print_current();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Installed once: ASan keeps its own SEGV report and calls back; otherwise plain handlers.
void install_crash_report() {
  static bool installed = false;
  if (installed) return;
  installed = true;
#ifdef HFTA_TEST_ASAN
  __sanitizer_set_death_callback(print_current);
#else
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, die_printing_current);
#endif
  ::signal(SIGALRM, die_printing_current);  // a read that hangs
}

// --- seed files and their mutations -------------------------------------------------------------

// A binary integer field of a format (a length, a count, a dimension).
struct Field {
  size_t offset, width;
  bool big_endian = false;
};

struct SeedFile {
  std::string name;
  std::string bytes;
  std::vector<Field> fields;
  std::vector<size_t> boundaries;  // offsets where the file's parts meet
  // A text part (a JSON header, a whole CSV file) whose numbers are overwritten; `length` is the
  // field holding its size, kept in step when a number changes the text's length.
  size_t text_begin = 0, text_end = 0;
  std::optional<Field> length;
};

uint64_t get_field(const std::string& b, const Field& f) {
  uint64_t v = 0;
  for (size_t i = 0; i < f.width; ++i) {
    const size_t at = f.big_endian ? f.offset + i : f.offset + f.width - 1 - i;
    v = (v << 8) | static_cast<uint8_t>(b[at]);
  }
  return v;
}

void set_field(std::string& b, const Field& f, uint64_t v) {
  for (size_t i = 0; i < f.width; ++i) {
    const size_t at = f.big_endian ? f.offset + f.width - 1 - i : f.offset + i;
    b[at] = static_cast<char>(v >> (8 * i));
  }
}

constexpr uint64_t kHostileValues[] = {0,
                                       1,
                                       0x7fffffffull,
                                       0x80000000ull,
                                       0xffffffffull,
                                       uint64_t{1} << 32,
                                       uint64_t{1} << 40,  // a terabyte
                                       uint64_t{1} << 62,
                                       0x7fffffffffffffffull,
                                       0x8000000000000000ull,
                                       0xffffffffffffffffull,   // -1
                                       0xfffffeffffffffffull,   // -2^40
                                       0xfffffffffffffff8ull};  // -8

constexpr const char* kHostileNumbers[] = {"0",
                                           "-1",
                                           "1099511627776",
                                           "274877906944",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "18446744073709551615",
                                           "-9223372036854775808",
                                           "99999999999999999999999",
                                           "4294967296",
                                           "1e300",
                                           "-1e300",
                                           "1.5",
                                           "1e-300"};

// The numbers (digit runs with an optional minus) inside [begin, end) as (offset, length).
std::vector<std::pair<size_t, size_t>> numbers_in(const std::string& b, size_t begin, size_t end) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = begin; i < end;) {
    if (!std::isdigit(static_cast<unsigned char>(b[i]))) {
      ++i;
      continue;
    }
    size_t start = i > begin && b[i - 1] == '-' ? i - 1 : i;
    while (i < end && std::isdigit(static_cast<unsigned char>(b[i]))) ++i;
    out.emplace_back(start, i - start);
  }
  return out;
}

// One to three mutations of `seed`, chosen by `mutation_seed`; `what` says which.
std::string mutate(const SeedFile& seed, uint64_t mutation_seed, std::string& what) {
  RngStream rng(mutation_seed, 0);
  std::string b = seed.bytes;
  size_t text_end = seed.text_end;
  const int rounds = rng.below(4) == 0 ? 2 + static_cast<int>(rng.below(2)) : 1;
  auto anywhere = [&](size_t extra) { return static_cast<size_t>(rng.below(b.size() + extra)); };
  auto boundary = [&] {
    const size_t at = seed.boundaries[rng.below(seed.boundaries.size())] + rng.below(3);
    return std::min(b.size(), at > 0 ? at - 1 : 0);
  };
  for (int r = 0; r < rounds; ++r) {
    switch (rng.below(7)) {
      case 0:  // bit flips
        if (b.empty()) break;
        for (uint64_t k = 0, n = 1 + rng.below(4); k < n; ++k) {
          const size_t at = anywhere(0);
          const int bit = static_cast<int>(rng.below(8));
          b[at] = static_cast<char>(b[at] ^ (1 << bit));
          what += fmt::format("flip bit {} of byte {}; ", bit, at);
        }
        break;
      case 1: {  // bytes overwritten
        if (b.empty()) break;
        const size_t at = anywhere(0), n = std::min<size_t>(b.size() - at, 1 + rng.below(8));
        const uint64_t how = rng.below(3);
        for (size_t i = 0; i < n; ++i)
          b[at + i] = static_cast<char>(how == 0 ? 0x00 : how == 1 ? 0xff : rng.next_u64());
        what += fmt::format("overwrite {} bytes at {} with {}; ", n, at,
                            how == 0   ? "0x00"
                            : how == 1 ? "0xff"
                                       : "noise");
        break;
      }
      case 2: {  // truncation, mostly at a boundary
        const size_t at = rng.below(3) == 0 ? anywhere(0) : boundary();
        b.resize(std::min(b.size(), at));
        what += fmt::format("truncate to {} bytes; ", b.size());
        break;
      }
      case 3: {  // inserted bytes
        const size_t at = rng.below(2) == 0 ? anywhere(1) : boundary();
        const size_t n = 1 + rng.below(16);
        std::string bytes(n, rng.below(2) == 0 ? '\0' : '\xff');
        if (rng.below(2) == 0)
          for (char& c : bytes) c = static_cast<char>(rng.next_u64());
        b.insert(at, bytes);
        what += fmt::format("insert {} bytes at {}; ", n, at);
        break;
      }
      case 4: {  // erased bytes
        if (b.empty()) break;
        const size_t at = anywhere(0), n = std::min<size_t>(b.size() - at, 1 + rng.below(16));
        b.erase(at, n);
        what += fmt::format("erase {} bytes at {}; ", n, at);
        break;
      }
      case 5: {  // a binary length or count field set to a hostile value
        if (seed.fields.empty()) break;
        const Field f = seed.fields[rng.below(seed.fields.size())];
        if (f.offset + f.width > b.size()) break;
        uint64_t v = kHostileValues[rng.below(std::size(kHostileValues))];
        if (rng.below(4) == 0) v = get_field(b, f) + (rng.below(2) == 0 ? 1 : -1);
        set_field(b, f, v);
        what += fmt::format("field at {} = {}; ", f.offset, v);
        break;
      }
      case 6: {  // a number of the text part set to a hostile value
        const auto numbers = numbers_in(b, seed.text_begin, std::min(text_end, b.size()));
        if (numbers.empty()) break;
        const auto [at, n] = numbers[rng.below(numbers.size())];
        const std::string v = kHostileNumbers[rng.below(std::size(kHostileNumbers))];
        b.replace(at, n, v);
        text_end = text_end + v.size() - n;
        if (seed.length && seed.length->offset + seed.length->width <= b.size())
          set_field(b, *seed.length, get_field(b, *seed.length) + v.size() - n);
        what += fmt::format("number at {} = {}; ", at, v);
        break;
      }
    }
  }
  return b;
}

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

std::string gzip(std::string_view bytes) {
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

// Writes each mutation of `seed` to `path` (gzip-compressed first when `gzip_after`) and calls
// `read`, which must succeed or throw hfta::Error naming `path`.
Tally replay(const std::string& reader, const SeedFile& seed, const std::string& path,
             const std::function<void()>& read, bool gzip_after = false) {
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
    write_bytes(path, gzip_after ? gzip(bytes) : bytes);
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
  std::snprintf(g_current, sizeof g_current, "no mutation");
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
