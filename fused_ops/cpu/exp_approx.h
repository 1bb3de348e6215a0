// A vectorizable exp for the CPU kernels' softmax loops (cross-entropy, attention): glibc's expf
// does not vectorize without -ffast-math.
#pragma once

#include <bit>
#include <cstdint>

namespace hfta::cpu {

// exp(x) in float from arithmetic and bit operations only, so `omp simd` loops vectorize it:
// Cephes' expf (range reduction by ln 2, degree-5 polynomial); relative error <= 8.4e-8
// (1.4 times 2^-24, measured over every float in [-87, 0]).
// Returns 0 below -87.3 (where expf goes subnormal), NaN for NaN, and is meant for x <= 0.
// Keep every branch a flat `a = cond ? b : a` select: GCC 12 did not if-convert a nested ?: here,
// and the exp loop silently went scalar (check with -fopt-info-vec-missed).
inline float exp_approx(float x) {
  constexpr float kLowest = -87.33654f, kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: t + kRound rounds t to an integer
  float r = x < kLowest ? kLowest : x;
  r = r > 88.0f ? 88.0f : r;
  r = r != r ? 0.0f : r;  // keep the bit tricks away from NaN; the NaN is restored at the end
  const float t = r * kLog2e + kRound;
  const int32_t n = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound);
  const float fn = t - kRound;
  r = r - fn * 0.693359375f + fn * 2.12194440e-4f;  // r - n ln 2, in two parts
  float poly = 1.9875691500e-4f;                    // Horner, highest degree first
  poly = poly * r + 1.3981999507e-3f;
  poly = poly * r + 8.3334519073e-3f;
  poly = poly * r + 4.1665795894e-2f;
  poly = poly * r + 1.6666665459e-1f;
  poly = poly * r + 5.0000001201e-1f;
  float e = (poly * r * r + r + 1.0f) * std::bit_cast<float>((n + 127) << 23);
  e = x < kLowest ? 0.0f : e;
  return x != x ? x : e;
}

}  // namespace hfta::cpu
