// Per-model random streams. Model b of an array draws from stream (seed, b), whatever B is, so
// model b trained in an array starts from, and drops out, exactly what it would alone.
#pragma once

#include <cmath>
#include <cstdint>

namespace hfta {

// SplitMix64: turns (seed, stream) into well-mixed generator state.
inline uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256**: small, fast, and defined by its algorithm alone, so results do not depend on the
// standard library's distribution code.
class RngStream {
 public:
  RngStream(uint64_t seed, uint64_t stream) {
    uint64_t x =
        seed * 0xD1342543DE82EF95ull + stream * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    for (auto& s : s_) s = splitmix64(x);
  }
  // Stream for model b of purpose `purpose` (e.g. init, dropout), independent across purposes.
  static RngStream for_model(uint64_t seed, int64_t b, uint64_t purpose) {
    return RngStream(seed ^ (purpose * 0xA24BAED4963EE407ull), static_cast<uint64_t>(b));
  }

  uint64_t next_u64() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1), 24 random bits.
  float uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next_u64()) * n) >> 64);
  }
  // Standard normal (Box-Muller in double, one value per call for simplicity).
  float normal() {
    double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Purposes, so that init and dropout of one model never share random numbers.
enum RngPurpose : uint64_t { kRngInit = 1, kRngDropout = 2, kRngData = 3, kRngHyper = 4 };

}  // namespace hfta
