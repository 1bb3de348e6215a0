#include "backend/cpu/gemm_timing.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"

namespace hfta::cpu {

namespace {

// Layer shapes of the models hfta builds, sized so one round of all of them takes some tens of
// milliseconds: an MLP layer, LeNet's fc1, a Transformer/BERT feed-forward layer at half the
// tokens, PointNet's per-point layers on 2 clouds' points, and an attention head's projections.
struct LayerShape {
  int64_t rows, in, out;
};
constexpr LayerShape kShapes[] = {
    {64, 784, 256},  {64, 3136, 1024},  {128, 512, 2048},
    {2048, 64, 128}, {2048, 128, 1024}, {64, 64, 64},
};
constexpr int kRounds = 3;

// Buffers placed as an arena places large tensors: page-aligned. It matters: oneDNN 2.6's
// weight-gradient GEMM (x^T dy) with a page-aligned dy whose rows are 1024 floats (4 KiB) ran
// 1.8x slower on a Zen 3 than with dy 16 bytes off (4 KiB aliasing; docs/benchmarks.md), so
// timing on malloc's offset buffers would mislead.
struct PageAlignedBuffer {
  explicit PageAlignedBuffer(size_t floats)
      : data(static_cast<float*>(
            std::aligned_alloc(kPage, (floats * 4 + kPage - 1) / kPage * kPage))) {
    HFTA_CHECK(data != nullptr, "out of memory: {} floats for timing GEMMs", floats);
  }
  ~PageAlignedBuffer() { std::free(data); }
  PageAlignedBuffer(const PageAlignedBuffer&) = delete;
  PageAlignedBuffer& operator=(const PageAlignedBuffer&) = delete;
  static constexpr size_t kPage = 4096;
  float* data;
};

// The two cases timed, as fused_ops/cpu/linear.cpp runs them for one model: the input gradient
// dx = dy w^T (NT) and the weight gradient dw = x^T dy (TN).
void run_case(size_t which, const LayerShape& s, const float* x, const float* w, const float* dy,
              float* dx, float* dw) {
  if (which == gemm_case(false, true))
    sgemm(false, true, s.rows, s.in, s.out, 1.0f, dy, s.out, w, s.out, 0.0f, dx, s.in);
  else
    sgemm(true, false, s.in, s.out, s.rows, 1.0f, x, s.in, dy, s.out, 0.0f, dw, s.out);
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

std::vector<GemmCaseTiming> time_gemm_libraries() {
  const GemmRouting saved_routing = gemm_routing();
  const int saved_threads = omp_get_max_threads();
  set_num_threads(1);
  size_t most = 0;
  for (const LayerShape& s : kShapes)
    most = std::max<size_t>(
        {most, size_t(s.rows * s.in), size_t(s.in * s.out), size_t(s.rows * s.out)});
  PageAlignedBuffer x(most), w(most), dy(most), dx(most), dw(most);
  for (size_t i = 0; i < most; ++i) {  // small, varied values: no denormals, no overflow
    x.data[i] = static_cast<float>(static_cast<int>(i * 7 % 13) - 6) * 0.01f;
    w.data[i] = static_cast<float>(static_cast<int>(i * 5 % 11) - 5) * 0.01f;
    dy.data[i] = static_cast<float>(static_cast<int>(i * 3 % 17) - 8) * 0.01f;
    dx.data[i] = dw.data[i] = 0.0f;
  }
  const GemmBackend libraries[] = {GemmBackend::kOneDnn, GemmBackend::kOpenBlas};
  std::vector<GemmCaseTiming> timings;
  for (const size_t c : kTimedGemmCases)
    for (const LayerShape& s : kShapes) {
      std::vector<double> samples[2];
      for (int round = 0; round <= kRounds; ++round)
        for (int l = 0; l < 2; ++l) {
          // Alternate which library goes first, so neither always meets the other's cache state.
          const int lib = (l + round) % 2;
          set_gemm_backend(libraries[lib]);
          const auto t0 = std::chrono::steady_clock::now();
          run_case(c, s, x.data, w.data, dy.data, dx.data, dw.data);
          const double ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
          if (round > 0) samples[lib].push_back(ms);  // round 0 warms up (oneDNN's JIT, pages)
        }
      timings.push_back({c, fmt::format("{} N={} {}->{}", gemm_case_name(c), s.rows, s.in, s.out),
                         median(samples[0]), median(samples[1])});
    }
  set_gemm_routing(saved_routing);
  set_num_threads(saved_threads);
  return timings;
}

double openblas_time_ratio(const std::vector<GemmCaseTiming>& timings, size_t which) {
  double onednn = 0.0, openblas = 0.0;
  for (const GemmCaseTiming& t : timings) {
    if (t.gemm_case != which) continue;
    onednn += t.onednn_ms;
    openblas += t.openblas_ms;
  }
  HFTA_CHECK(onednn > 0.0 && openblas > 0.0,
             "no positive GEMM timings of case {} (oneDNN {} ms, OpenBLAS {} ms)",
             gemm_case_name(which), onednn, openblas);
  return openblas / onednn;
}

std::string describe_gemm_timing() {
  std::vector<std::string> shapes;
  for (const LayerShape& s : kShapes)
    shapes.push_back(fmt::format("N={} {}->{}", s.rows, s.in, s.out));
  return fmt::format("{} shapes ({}), {} rounds, OpenBLAS below {}", std::size(kShapes),
                     fmt::join(shapes, ", "), kRounds, kOpenBlasWinsBelow);
}

GemmRouting faster_gemm_routing(const std::vector<GemmCaseTiming>& timings) {
  GemmRouting routing;
  routing.fill(GemmBackend::kOneDnn);
  for (const size_t c : kTimedGemmCases)
    if (openblas_time_ratio(timings, c) < kOpenBlasWinsBelow) routing[c] = GemmBackend::kOpenBlas;
  return routing;
}

const char* gemm_backend_name(GemmBackend backend) {
  return backend == GemmBackend::kOpenBlas ? "openblas" : "onednn";
}

const char* gemm_case_name(size_t which) {
  static const char* names[] = {"NN", "NT", "TN", "TT"};
  HFTA_CHECK(which < 4, "no sgemm case {}", which);
  return names[which];
}

GemmBackend parse_gemm_backend(const std::string& name) {
  if (name == "onednn") return GemmBackend::kOneDnn;
  if (name == "openblas") return GemmBackend::kOpenBlas;
  throw Error(fmt::format("unknown sgemm library '{}': use onednn or openblas", name));
}

}  // namespace hfta::cpu
