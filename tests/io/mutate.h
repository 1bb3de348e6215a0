// Seeded mutations of valid small files: bit flips, bytes overwritten with 0x00, 0xFF or noise,
// truncation (mostly where a file's parts meet), inserted and erased bytes, binary length or count
// fields set to hostile values (2^40, 2^63-1, -1, ...), and numbers of a text part (a JSON header,
// a CSV file) replaced by hostile ones. Shared by the hostile-bytes tests (tests/io/) and the fuzz
// targets' replay driver (fuzz/replay_main.cpp); no test framework inside.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"

namespace hfta::hostile {

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

inline uint64_t get_field(const std::string& b, const Field& f) {
  uint64_t v = 0;
  for (size_t i = 0; i < f.width; ++i) {
    const size_t at = f.big_endian ? f.offset + i : f.offset + f.width - 1 - i;
    v = (v << 8) | static_cast<uint8_t>(b[at]);
  }
  return v;
}

inline void set_field(std::string& b, const Field& f, uint64_t v) {
  for (size_t i = 0; i < f.width; ++i) {
    const size_t at = f.big_endian ? f.offset + f.width - 1 - i : f.offset + i;
    b[at] = static_cast<char>(v >> (8 * i));
  }
}

inline constexpr uint64_t kHostileValues[] = {0,
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

inline constexpr const char* kHostileNumbers[] = {"0",
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
inline std::vector<std::pair<size_t, size_t>> numbers_in(const std::string& b, size_t begin,
                                                         size_t end) {
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
inline std::string mutate(const SeedFile& seed, uint64_t mutation_seed, std::string& what) {
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

}  // namespace hfta::hostile
