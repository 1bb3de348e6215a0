// HFTA_HOST_DEVICE marks the arithmetic that CUDA kernels and host tests share (the *_math.h
// headers under fused_ops/cuda/ and optim/cuda/): `__host__ __device__` under nvcc, nothing for the
// host compiler, so a host test runs the kernels' exact code. No project include: nvcc compiles
// these headers in C++17, without fmt.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define HFTA_HOST_DEVICE __host__ __device__
#else
#define HFTA_HOST_DEVICE
#endif

namespace hfta {

// a * b rounded to float, never fused with a following add: nvcc contracts `a * b + c` into an
// fma, and so does GCC in a host test (its default -ffp-contract=fast, across inlined calls),
// while the CPU ops whose bits the kernels match compute without contraction there. The host
// branch (the tests' mirrors) stores the product to a volatile, which no compiler may fuse.
HFTA_HOST_DEVICE inline float rounded_product(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  volatile float product = a * b;
  return product;
#endif
}

// a * b + c rounded once: the device's and the host's fma round identically.
HFTA_HOST_DEVICE inline float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// The libm calls the kernels and their host mirrors share, spelled once for both compilers:
// CUDA's float functions on the device, the host's std:: ones in the mirrors. sqrt_rn is IEEE
// rounded on both sides (nvcc's default -prec-sqrt=true).
HFTA_HOST_DEVICE inline float sqrt_rn(float v) {
#if defined(__CUDA_ARCH__)
  return sqrtf(v);
#else
  return std::sqrt(v);
#endif
}
HFTA_HOST_DEVICE inline float exp_f(float v) {
#if defined(__CUDA_ARCH__)
  return expf(v);
#else
  return std::exp(v);
#endif
}
HFTA_HOST_DEVICE inline float log1p_f(float v) {
#if defined(__CUDA_ARCH__)
  return log1pf(v);
#else
  return std::log1p(v);
#endif
}
HFTA_HOST_DEVICE inline float tanh_f(float v) {
#if defined(__CUDA_ARCH__)
  return tanhf(v);
#else
  return std::tanh(v);
#endif
}
HFTA_HOST_DEVICE inline float erfc_f(float v) {
#if defined(__CUDA_ARCH__)
  return erfcf(v);
#else
  return std::erfc(v);
#endif
}
// Double precision, for sums kept in double: IEEE-rounded sqrt on both sides, exp and log as each
// side's libm computes them.
HFTA_HOST_DEVICE inline double sqrt_d(double v) {
#if defined(__CUDA_ARCH__)
  return sqrt(v);
#else
  return std::sqrt(v);
#endif
}
HFTA_HOST_DEVICE inline double exp_d(double v) {
#if defined(__CUDA_ARCH__)
  return exp(v);
#else
  return std::exp(v);
#endif
}
HFTA_HOST_DEVICE inline double log_d(double v) {
#if defined(__CUDA_ARCH__)
  return log(v);
#else
  return std::log(v);
#endif
}

}  // namespace hfta
