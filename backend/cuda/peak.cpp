// The device's fp32 peak as `hfta sweep --device cuda` reports percentages against it: a large
// cuBLAS sgemm on the thread's stream, in the backend's math mode (plain fp32, no TF32).
#include "backend/cuda/peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "backend/cuda/cublas.h"
#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"

namespace hfta::cuda {

double measure_sgemm_peak_gflops() {
  // 4096^3: 137 GFLOP a call, long enough (milliseconds) that a launch is noise, and three 64 MiB
  // operands, several times the L2 of current GPUs.
  constexpr int kN = 4096, kTimedCalls = 5;
  const Shape square{kN, kN};
  DeviceArena counting;
  for (int i = 0; i < 3; ++i) counting.carve(square);
  DeviceArena arena(counting.used(), "the sgemm peak's operands");
  const TensorView a = arena.carve(square), b = arena.carve(square), c = arena.carve(square);
  // Not zeros (a GEMM of zeros can run faster than real data): every byte 0x3c, about 0.0115.
  for (const TensorView& t : {a, b})
    HFTA_CUDA_CHECK(
        cudaMemsetAsync(t.data, 0x3c, static_cast<size_t>(t.numel()) * sizeof(float), stream()));
  const float one = 1.0f, zero = 0.0f;
  auto call = [&] {
    HFTA_CUDA_CHECK(cublas().sgemm_strided_batched(blas(), CUBLAS_OP_N, CUBLAS_OP_N, kN, kN, kN,
                                                   &one, a.data, kN, 0, b.data, kN, 0, &zero,
                                                   c.data, kN, 0, 1));
  };
  call();  // warm-up: kernel selection, clocks up
  synchronize();
  std::vector<double> seconds;
  for (int i = 0; i < kTimedCalls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    synchronize();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + kTimedCalls / 2, seconds.end());
  return 2.0 * kN * kN * double(kN) / seconds[kTimedCalls / 2] / 1e9;
}

}  // namespace hfta::cuda
