// CPU fused linear on cpu::sgemm (oneDNN's sgemm by default, OpenBLAS's with HFTA_GEMM=openblas;
// see GemmBackend in backend/cpu/runtime.h).
//
// Parallelization (for_each_gemm_task, fused_ops/cpu/gemm_tasks.h): with at least as many GEMM
// tasks as threads, the tasks are spread over the threads and each GEMM runs single-threaded (both
// sgemm libraries run sequentially inside a parallel region), which keeps each model's weights in
// one core's cache and needs no synchronization inside a GEMM; with fewer, the tasks run one after
// another and each GEMM uses all threads. A task is one model's GEMM, except that with fewer models
// than threads forward splits each model's output columns into blocks (of at least 64 columns) to
// make more tasks, and backward always makes each model's input-gradient and weight-gradient
// GEMMs separate tasks. HFTA_PARALLELISM=models|inside overrides the choice; benchmarks/op_bench
// par=... measures both sides of it.
#include "fused_ops/linear.h"

#include <algorithm>

#include "backend/cpu/runtime.h"
#include "core/parallel.h"
#include "fused_ops/cpu/gemm_tasks.h"

namespace hfta::cpu {

void linear_forward(const LinearParams& p, const LinearForwardArgs& a) {
  const TensorView &x = a.x, &weight = a.weight, &bias = a.bias, &y = a.y;
  const int64_t N = p.N, fi = p.in_features, fo = p.out_features;
  // With fewer models than threads each model's output columns are split into one block per
  // thread, and every block is a single-threaded GEMM: for B = 1 this measured faster than one
  // multithreaded GEMM (op_bench linear B=1, N=64 3136->1024). Blocks are multiples of 16
  // columns so each stays a whole number of SIMD vectors.
  // Only where blocks compute exactly what the whole GEMM does (backend/cpu/runtime.h).
  const int64_t threads = num_threads();
  const int64_t splits =
      p.B >= threads || !sgemm_blocks_are_exact(false, false)
          ? 1
          : std::min<int64_t>((threads + p.B - 1) / p.B, std::max<int64_t>(1, fo / 64));
  const int64_t block = ((fo + splits - 1) / splits + 15) / 16 * 16;
  for_each_gemm_task(p.B * splits, [&](int64_t t) {
    const int64_t b = t / splits, c0 = std::min(fo, (t % splits) * block);
    const int64_t cols = std::min(fo, c0 + block) - c0;
    if (cols <= 0) return;
    const float* xb = p.shared_input ? x.data : x.data + b * N * fi;
    float* yb = y.data + b * N * fo + c0;
    float beta = 0.0f;
    if (p.bias) {
      const float* bb = bias.data + b * fo + c0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < cols; ++o) yb[n * fo + o] = bb[o];
      beta = 1.0f;
    }
    sgemm(false, false, N, cols, fi, 1.0f, xb, fi, weight.data + b * fi * fo + c0, fo, beta, yb,
          fo);
  });
}

void linear_backward(const LinearParams& p, const LinearBackwardArgs& a) {
  const TensorView &x = a.x, &weight = a.weight, &dy = a.dy, &dx = a.dx, &dweight = a.dweight,
                   &dbias = a.dbias;
  const float dx_beta = a.accumulate_dx ? 1.0f : 0.0f;
  const int64_t N = p.N, fi = p.in_features, fo = p.out_features;
  // Backward is a set of independent GEMMs: each model's input gradient and its weight (and
  // bias) gradient. The shared input's gradient sums over models, so it is one task that runs
  // the models in order. With at least as many tasks as threads each task runs single-threaded
  // on its own thread; so even B = 1 runs dx and dweight side by side on 2 threads, which
  // measured faster than two 2-thread GEMMs one after the other (op_bench linear B=1).
  const bool want_dx = !dx.empty(), want_dw = !dweight.empty() || (p.bias && !dbias.empty());
  auto input_grad = [&](int64_t b) {
    sgemm(false, true, N, fi, fo, 1.0f, dy.data + b * N * fo, fo, weight.data + b * fi * fo, fo,
          dx_beta, dx.data + b * N * fi, fi);
  };
  auto shared_input_grad = [&] {
    for (int64_t b = 0; b < p.B; ++b)
      sgemm(false, true, N, fi, fo, 1.0f, dy.data + b * N * fo, fo, weight.data + b * fi * fo, fo,
            b == 0 ? dx_beta : 1.0f, dx.data, fi);
  };
  const float dparams_beta = a.accumulate_dparams ? 1.0f : 0.0f;
  auto weight_grad = [&](int64_t b) {
    const float* xb = p.shared_input ? x.data : x.data + b * N * fi;
    const float* dyb = dy.data + b * N * fo;
    if (!dweight.empty())
      sgemm(true, false, fi, fo, N, 1.0f, xb, fi, dyb, fo, dparams_beta, dweight.data + b * fi * fo,
            fo);
    if (p.bias && !dbias.empty()) {
      float* db = dbias.data + b * fo;
      if (!a.accumulate_dparams) std::fill(db, db + fo, 0.0f);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < fo; ++o) db[o] += dyb[n * fo + o];
    }
  };
  // Task t: weight gradient of model t for t < B (if wanted), then the input gradients.
  const int64_t dw_tasks = want_dw ? p.B : 0;
  const int64_t dx_tasks = !want_dx ? 0 : p.shared_input ? 1 : p.B;
  auto run_task = [&](int64_t t) {
    if (t < dw_tasks) return weight_grad(t);
    if (p.shared_input) return shared_input_grad();
    input_grad(t - dw_tasks);
  };
  for_each_gemm_task(dw_tasks + dx_tasks, run_task);
}

}  // namespace hfta::cpu
