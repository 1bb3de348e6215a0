// AVX-512 intrinsics for the CPU kernels (when the build targets AVX-512), included without the
// false warnings GCC 12 raises inside its own headers.
#pragma once

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wuninitialized and
// (in _mm512_reduce_add_ps) -Wmaybe-uninitialized flag.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
