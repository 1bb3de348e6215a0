// HFTA_HOST_DEVICE marks the arithmetic that CUDA kernels and host tests share (the *_math.h
// headers under fused_ops/cuda/ and optim/cuda/): `__host__ __device__` under nvcc, nothing for the
// host compiler, so a host test runs the kernels' exact code. No other include: nvcc compiles
// these headers in C++17, without fmt.
#pragma once

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

}  // namespace hfta
