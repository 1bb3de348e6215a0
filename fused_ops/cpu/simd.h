// x86 intrinsics for the CPU kernels (AVX-512 or AVX2, whichever the build targets), included
// without the false warnings GCC 12 raises inside its own headers, and the lane mask the kernels'
// masked moves share.
#pragma once

#include <cstdint>

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wuninitialized and
// (in _mm512_reduce_add_ps) -Wmaybe-uninitialized flag.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#elif defined(__AVX2__)
#include <immintrin.h>
#endif

namespace hfta::cpu {

#if defined(__AVX512F__)
// The first min(n, 16) lanes of a 16-float vector (n >= 1), as AVX-512's masked moves take them.
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}
#elif defined(__AVX2__)
// The first min(n, 8) lanes of an 8-float vector (n >= 1): all bits set in those lanes, as
// AVX2's masked moves take them.
inline __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

}  // namespace hfta::cpu
