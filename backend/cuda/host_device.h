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
