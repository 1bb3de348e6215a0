// CPU fused linear on OpenBLAS sgemm.
//
// Parallelization: with at least as many models as threads, one single-threaded GEMM per model
// runs on each thread (OpenBLAS's OpenMP build goes sequential inside a parallel region), which
// keeps each model's weights in one core's cache and needs no synchronization inside a GEMM.
// With fewer models than threads, the models run one after another and each GEMM uses all
// threads. benchmarks/op_bench measures both sides of this choice.
#include "backend/cpu/runtime.h"
#include "core/parallel.h"
#include "fused_ops/linear.h"

namespace hfta::cpu {

namespace {

template <typename F>
void for_each_model(int64_t B, F&& per_model) {
  ModelParallelism mode = model_parallelism();
  bool across = mode == ModelParallelism::kAcrossModels ||
                (mode == ModelParallelism::kAuto && B >= num_threads() && num_threads() > 1);
  if (across)
    parallel_for(B, per_model);
  else
    for (int64_t b = 0; b < B; ++b) per_model(b);
}

}  // namespace

void linear_forward(const LinearParams& p, const TensorView& x, const TensorView& weight,
                    const TensorView& bias, const TensorView& y) {
  const int64_t N = p.N, fi = p.in_features, fo = p.out_features;
  for_each_model(p.B, [&](int64_t b) {
    const float* xb = p.shared_input ? x.data : x.data + b * N * fi;
    float* yb = y.data + b * N * fo;
    float beta = 0.0f;
    if (p.bias) {
      const float* bb = bias.data + b * fo;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < fo; ++o) yb[n * fo + o] = bb[o];
      beta = 1.0f;
    }
    sgemm(false, false, N, fo, fi, 1.0f, xb, fi, weight.data + b * fi * fo, fo, beta, yb, fo);
  });
}

void linear_backward(const LinearParams& p, const TensorView& x, const TensorView& weight,
                     const TensorView& dy, const TensorView& dx, const TensorView& dweight,
                     const TensorView& dbias) {
  const int64_t N = p.N, fi = p.in_features, fo = p.out_features;
  // The shared input's gradient sums over models, so models cannot write it concurrently.
  if (!dx.empty() && p.shared_input) {
    for (int64_t b = 0; b < p.B; ++b)
      sgemm(false, true, N, fi, fo, 1.0f, dy.data + b * N * fo, fo, weight.data + b * fi * fo, fo,
            b == 0 ? 0.0f : 1.0f, dx.data, fi);
  }
  for_each_model(p.B, [&](int64_t b) {
    const float* xb = p.shared_input ? x.data : x.data + b * N * fi;
    const float* dyb = dy.data + b * N * fo;
    if (!dx.empty() && !p.shared_input)
      sgemm(false, true, N, fi, fo, 1.0f, dyb, fo, weight.data + b * fi * fo, fo, 0.0f,
            dx.data + b * N * fi, fi);
    if (!dweight.empty())
      sgemm(true, false, fi, fo, N, 1.0f, xb, fi, dyb, fo, 1.0f, dweight.data + b * fi * fo, fo);
    if (p.bias && !dbias.empty()) {
      float* db = dbias.data + b * fo;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < fo; ++o) db[o] += dyb[n * fo + o];
    }
  });
}

}  // namespace hfta::cpu
