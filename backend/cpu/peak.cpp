#include "backend/cpu/peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cpu/runtime.h"

namespace hfta::cpu {

namespace {

constexpr int64_t kN = 2048;

// GFLOP/s of `gemm` (one kN^3 sgemm) over at least 5 calls after a warm-up call.
double time_gflops(const std::function<void(const float*, const float*, float*)>& gemm,
                   PeakStatistic statistic = PeakStatistic::kMedian) {
  using clock = std::chrono::steady_clock;
  auto now_ms = [] {
    return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
  };
  const double min_ms = 300.0;
  std::vector<float> a(kN * kN, 1.0f), b(kN * kN, 0.5f), c(kN * kN);
  auto run = [&] { gemm(a.data(), b.data(), c.data()); };
  run();  // warm-up: thread start, first touch of c, JIT
  std::vector<double> samples;
  const double start_all = now_ms();
  while (samples.size() < 5 || (now_ms() - start_all < min_ms && samples.size() < 200)) {
    const double t0 = now_ms();
    run();
    samples.push_back(now_ms() - t0);
  }
  double ms = *std::min_element(samples.begin(), samples.end());
  if (statistic == PeakStatistic::kMedian) {
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    ms = samples[samples.size() / 2];
  }
  return 2.0 * kN * kN * kN / (ms * 1e6);
}

}  // namespace

double measure_peak_gflops() {
  set_openblas_threads(omp_get_max_threads());  // the peak of all threads
  const double gflops = time_gflops([](const float* a, const float* b, float* c) {
    openblas_sgemm(false, false, kN, kN, kN, 1.0f, a, kN, b, kN, 0.0f, c, kN);
  });
  set_openblas_threads(1);
  return gflops;
}

double measure_onednn_sgemm_gflops(PeakStatistic statistic) {
  const GemmRouting saved = gemm_routing();
  set_gemm_backend(GemmBackend::kOneDnn);
  const double gflops = time_gflops(
      [](const float* a, const float* b, float* c) {
        sgemm(false, false, kN, kN, kN, 1.0f, a, kN, b, kN, 0.0f, c, kN);
      },
      statistic);
  set_gemm_routing(saved);
  return gflops;
}

double measure_machine_peak_gflops() {
  return std::max(measure_peak_gflops(), measure_onednn_sgemm_gflops());
}

}  // namespace hfta::cpu
