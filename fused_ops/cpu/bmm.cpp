// CPU fused bmm: one row-major GEMM per (model, sample) on cpu::sgemm (oneDNN's sgemm by default,
// OpenBLAS's with HFTA_GEMM=openblas; see backend/cpu/runtime.h).
//
// Parallelization: PointNet has B*N = B*32 small problems (L = 2500 points, K, M = 3 or 64),
// each far too small to split well inside a GEMM. With at least as many problems as threads,
// parallel_for spreads them over the threads and each GEMM runs single-threaded (both sgemm
// libraries run sequentially inside a parallel region): no synchronization inside a GEMM, and a
// problem's x, t and y stay in one core's cache. With fewer problems than threads they run one
// after another and each GEMM uses every thread. HFTA_PARALLELISM=models|inside overrides the
// choice, as for linear. Backward runs a problem's dx and dt GEMMs in the same task: both read
// its dy, which is then still in cache for the second.
#include "fused_ops/bmm.h"

#include "backend/cpu/runtime.h"
#include "fused_ops/cpu/gemm_tasks.h"

namespace hfta::cpu {

void bmm_forward(const BmmParams& p, const BmmForwardArgs& a) {
  const int64_t L = p.L, K = p.K, M = p.M;
  for_each_gemm_task(p.B * p.N, [&](int64_t i) {
    sgemm(false, false, L, M, K, 1.0f, a.x.data + i * L * K, K, a.t.data + i * K * M, M, 0.0f,
          a.y.data + i * L * M, M);
  });
}

void bmm_backward(const BmmParams& p, const BmmBackwardArgs& a) {
  const int64_t L = p.L, K = p.K, M = p.M;
  const float dx_beta = a.accumulate_dx ? 1.0f : 0.0f, dt_beta = a.accumulate_dt ? 1.0f : 0.0f;
  for_each_gemm_task(p.B * p.N, [&](int64_t i) {
    const float* dy = a.dy.data + i * L * M;
    if (!a.dx.empty())  // dx [L, K] = dy [L, M] t^T
      sgemm(false, true, L, K, M, 1.0f, dy, M, a.t.data + i * K * M, M, dx_beta,
            a.dx.data + i * L * K, K);
    if (!a.dt.empty())  // dt [K, M] = x^T dy
      sgemm(true, false, K, M, L, 1.0f, a.x.data + i * L * K, K, dy, M, dt_beta,
            a.dt.data + i * K * M, M);
  });
}

}  // namespace hfta::cpu
