#include "backend/cpu/runtime.h"

#include <cblas.h>
#include <omp.h>

#include <dnnl.hpp>

#include "backend/cpu/dnnl_context.h"
#include "core/error.h"

namespace hfta::cpu {

void set_num_threads(int threads) {
  if (threads <= 0) return;
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

std::string describe_runtime() {
  const dnnl_version_t* v = dnnl_version();
  const char* parallel[] = {"sequential", "pthreads", "OpenMP"};
  int mode = openblas_get_parallel();
  return fmt::format("OpenBLAS {} ({} build, {} threads); oneDNN {}.{}.{} (cpu runtime {}); "
                     "OpenMP {} threads",
                     openblas_get_config(), mode >= 0 && mode <= 2 ? parallel[mode] : "unknown",
                     openblas_get_num_threads(), v->major, v->minor, v->patch,
                     v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other",
                     omp_get_max_threads());
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
           int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& dnnl_stream() {
  static dnnl::stream stream(dnnl_engine());
  return stream;
}

dnnl::memory to_layout(const dnnl::memory& user, const dnnl::memory::desc& want) {
  if (user.get_desc() == want) return user;
  dnnl::memory out(want, dnnl_engine());
  dnnl::reorder(user, out).execute(dnnl_stream(), const_cast<dnnl::memory&>(user), out);
  return out;
}

void from_layout(const dnnl::memory& from, const dnnl::memory& user) {
  if (from.get_desc() == user.get_desc()) return;
  dnnl::reorder(from, user)
      .execute(dnnl_stream(), const_cast<dnnl::memory&>(from), const_cast<dnnl::memory&>(user));
}

}  // namespace hfta::cpu
