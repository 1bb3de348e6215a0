// CPU fused linear on cpu::sgemm (oneDNN's sgemm by default, OpenBLAS's with HFTA_GEMM=openblas;
// see GemmBackend in backend/cpu/runtime.h).
//
// Parallelization (for_each_gemm_task, fused_ops/cpu/gemm_tasks.h): with at least as many GEMM
// tasks as threads, the tasks are spread over the threads and each GEMM runs single-threaded (both
// sgemm libraries run sequentially inside a parallel region), which keeps each model's weights in
// one core's cache and needs no synchronization inside a GEMM; with fewer, the tasks run one after
// another and each GEMM uses all threads. A task is one model's GEMM, except that with fewer models
// than threads forward splits each model's output columns into blocks (of at least 64 columns) to
// make more tasks, and backward always makes each model's weight-gradient GEMM and its
// input-gradient GEMM's column blocks separate tasks (of unequal cost, handed out dynamically).
// HFTA_PARALLELISM=models|inside overrides the choice; benchmarks/op_bench par=... measures both
// sides of it.
#include "fused_ops/linear.h"

#include <algorithm>

#include "backend/cpu/runtime.h"
#include "core/parallel.h"
#include "fused_ops/cpu/gemm_tasks.h"

namespace hfta::cpu {

namespace {

// The input gradient dx = dy w^T of a layer with many inputs runs as column blocks of about
// kInputGradBlock columns, each a task of its own: whole, it was one task beside the weight
// gradient's, and its NT product takes about twice as long on one thread as the weight
// gradient's TN product (LeNet's fc1: 3.5 against 1.9 ms), so with two threads one of them sat
// idle for a third of the layer's backward; in blocks handed to whichever thread is free the
// threads finish together (docs/benchmarks.md, "Linear layers' input gradient in blocks"). The
// cut depends only on the layer's shape, never on B, the plan or the threads: NT blocks do not
// compute exactly what the whole product does (sgemm_blocks_are_exact), so every way of running a
// model computes its gradient in the same blocks.
constexpr int64_t kInputGradBlock = 512;
int64_t input_grad_blocks(const LinearParams& p) {
  return std::max<int64_t>(1, p.in_features / kInputGradBlock);
}
}  // namespace

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
  // Backward is a set of independent GEMMs: each model's weight (and bias) gradient and its
  // input gradient's column blocks (input_grad_blocks). A shared input's gradient sums over the
  // models, so each of its blocks is one task that runs the models in order. With at least as
  // many tasks as threads each task runs single-threaded on whichever thread is free; so even
  // B = 1 runs dweight and dx's blocks side by side on 2 threads, which measured faster than
  // two 2-thread GEMMs one after the other (op_bench linear B=1).
  const bool want_dx = !dx.empty(), want_dw = !dweight.empty() || (p.bias && !dbias.empty());
  const int64_t blocks = input_grad_blocks(p);
  const int64_t block = ((fi + blocks - 1) / blocks + 15) / 16 * 16;
  // Columns [c0, c0 + cols) of model b's input gradient (a shared input's: every model's, summed
  // in order).
  auto input_grad = [&](int64_t b, int64_t c0, int64_t cols, float beta) {
    sgemm(false, true, N, cols, fo, 1.0f, dy.data + b * N * fo, fo,
          weight.data + b * fi * fo + c0 * fo, fo, beta,
          dx.data + (p.shared_input ? 0 : b * N * fi) + c0, fi);
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
  // Tasks: the weight gradient of each model (if wanted), then the input gradients' column blocks,
  // model by model (a shared input's block sums over the models in one task).
  const int64_t dw_tasks = want_dw ? p.B : 0;
  const int64_t dx_tasks = !want_dx ? 0 : (p.shared_input ? 1 : p.B) * blocks;
  auto run_task = [&](int64_t t) {
    if (t < dw_tasks) return weight_grad(t);
    const int64_t k = (t - dw_tasks) % blocks, c0 = std::min(fi, k * block);
    const int64_t cols = std::min(fi, c0 + block) - c0;
    if (cols <= 0) return;
    if (!p.shared_input) return input_grad((t - dw_tasks) / blocks, c0, cols, dx_beta);
    for (int64_t b = 0; b < p.B; ++b) input_grad(b, c0, cols, b == 0 ? dx_beta : 1.0f);
  };
  // Layers whose input gradient is one task keep the static spread: on the MLP's small GEMMs the
  // dynamic hand-out gained nothing (docs/benchmarks.md, "Linear layers' input gradient in
  // blocks").
  for_each_gemm_task(dw_tasks + dx_tasks, run_task,
                     blocks > 1 ? GemmTasks::kUneven : GemmTasks::kEven);
}

}  // namespace hfta::cpu
