// Launch geometry shared by the CUDA kernels (*_kernels.cu): 256-thread blocks and a grid for a
// grid-stride loop over `total` elements, capped at 65536 blocks (each thread then takes several
// elements). Kernels-only, like kernels.h: no project header (nvcc compiles it in C++17).
#pragma once

#include <algorithm>
#include <cstdint>

namespace hfta::cuda::kernels {

inline constexpr int kThreads = 256;

inline unsigned grid_for(int64_t total) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, int64_t{1} << 16));
}

#if defined(__CUDACC__)
// f(i) for every i in [0, n): each thread takes its own index, then every grid size-th one after
// it (the grid-stride loop of the elementwise kernels, launched with grid_for(n)).
template <typename F>
__device__ inline void for_each_index(int64_t n, F&& f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    f(i);
}
#endif

}  // namespace hfta::cuda::kernels
