#include "backend/cpu/runtime.h"

#include <cblas.h>
#include <omp.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>

#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/gemm_timing.h"
#include "core/arena.h"
#include "core/determinism.h"
#include "core/error.h"

namespace hfta::cpu {

namespace {

// HFTA_GEMM=openblas from the start; the hfta commands then settle the routing
// (choose_gemm_library), benchmarks and tests keep this one or set their own.
GemmRouting initial_gemm_routing() {
  const char* env = std::getenv("HFTA_GEMM");
  const GemmBackend all =
      env && std::string(env) == "openblas" ? GemmBackend::kOpenBlas : GemmBackend::kOneDnn;
  return {all, all, all, all};
}
GemmRouting g_gemm_routing = initial_gemm_routing();

ModelParallelism initial_model_parallelism() {
  const char* env = std::getenv("HFTA_PARALLELISM");
  if (env && std::string(env) == "models") return ModelParallelism::kAcrossModels;
  if (env && std::string(env) == "inside") return ModelParallelism::kInsideOp;
  return ModelParallelism::kAuto;
}
ModelParallelism g_model_parallelism = initial_model_parallelism();

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// OpenBLAS 0.3.21 (Debian 12) does not recognise newer CPUs (e.g. Xeon model 207) and falls back
// to its "Prescott" SSE3 kernels, several times slower than its AVX-512 ones. It picks its
// kernels when the library loads, before main(), so the only fix is OPENBLAS_CORETYPE in the
// environment at load time: set it and re-execute this program once. HFTA_NO_REEXEC=1 turns this
// off.
//
// The OpenMP wait policy is left to the user (docs/design.md): libgomp's default spins at
// barriers, which is fastest for tiny models when the process has the cores to itself (passive
// waiting pays a thread wake-up per parallel region), and an order of magnitude slower when
// another OpenMP process shares them (each spins on the core the other's late thread needs).
// So processes that share cores by design (the concurrent mode of `hfta sweep`, ctest -j2) are
// started with OMP_WAIT_POLICY=passive. Numbers: docs/benchmarks.md, 'Measurements behind code
// choices'.
void init_runtime(char** argv, int threads) {
  const bool fallback_core = lower(openblas_get_corename()) == "prescott";
  if (fallback_core && std::getenv("OPENBLAS_CORETYPE") == nullptr &&
      std::getenv("HFTA_NO_REEXEC") == nullptr) {
    const char* core = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                         : nullptr;
    if (core != nullptr) {
      setenv("OPENBLAS_CORETYPE", core, 1);
      setenv("HFTA_NO_REEXEC", "1", 1);  // never loop
      execv("/proc/self/exe", argv);
      // execv only returns on failure: keep going with the slow kernels.
    }
  }
  set_num_threads(threads);
}

bool onednn_has_avx512_kernels() {
  static const bool has = [] {
    switch (dnnl::get_effective_cpu_isa()) {
      case dnnl::cpu_isa::sse41:
      case dnnl::cpu_isa::avx:
      case dnnl::cpu_isa::avx2:
      case dnnl::cpu_isa::avx2_vnni:
        return false;
      default:
        return true;
    }
  }();
  return has;
}

void set_gemm_routing(const GemmRouting& routing) { g_gemm_routing = routing; }
GemmRouting gemm_routing() { return g_gemm_routing; }
void set_gemm_backend(GemmBackend backend) {
  g_gemm_routing = {backend, backend, backend, backend};
}
void set_model_parallelism(ModelParallelism mode) { g_model_parallelism = mode; }
ModelParallelism model_parallelism() { return g_model_parallelism; }

// Sets flush-to-zero and denormals-are-zero on every OpenMP thread. Each thread has its own
// MXCSR, and a thread that meets denormals (tiny gradients, Adam's v of a dead unit) runs its
// arithmetic through slow microcode assists; in a parallel loop the other threads then wait at
// the barrier for it (see docs/benchmarks.md, 'Measurements behind code choices').
// PyTorch offers the same switch (torch.set_flush_denormal). Results of fused and serial runs are
// affected identically, so equivalence is untouched. HFTA_DENORMALS=keep turns it off.
static void flush_denormals_on_all_threads() {
  const char* keep = std::getenv("HFTA_DENORMALS");
  if (keep != nullptr && std::string(keep) == "keep") return;
#pragma omp parallel
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)
}

void set_num_threads(int threads) {
  if (threads > 0) {
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
  }
  flush_denormals_on_all_threads();
}

namespace {
int g_openblas_threads = 1;
}  // namespace

void set_openblas_threads(int threads) { g_openblas_threads = threads; }

bool sgemm_blocks_are_exact(bool trans_a, bool trans_b) {
  return !trans_a && !trans_b && g_gemm_routing[gemm_case(false, false)] == GemmBackend::kOneDnn;
}

std::string describe_gemm_libraries() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{} (core {}); oneDNN {}.{}.{}", openblas_get_config(),
                     openblas_get_corename(), v->major, v->minor, v->patch);
}

std::string describe_gemm_routing(const GemmRouting& routing) {
  auto name = [](GemmBackend b) { return b == GemmBackend::kOneDnn ? "oneDNN" : "OpenBLAS"; };
  if (routing[1] == routing[0] && routing[2] == routing[0] && routing[3] == routing[0])
    return name(routing[0]);
  std::string text;
  for (GemmBackend b : {GemmBackend::kOneDnn, GemmBackend::kOpenBlas}) {
    std::string mine;
    for (size_t c = 0; c < 4; ++c)
      if (routing[c] == b) mine += fmt::format("{}{}", mine.empty() ? "" : ", ", gemm_case_name(c));
    if (!mine.empty()) text += fmt::format("{}{} ({})", text.empty() ? "" : " and ", name(b), mine);
  }
  return text;
}

std::string describe_runtime() {
  const dnnl_version_t* v = dnnl_version();
  const char* parallel[] = {"sequential", "pthreads", "OpenMP"};
  int mode = openblas_get_parallel();
  // openblas_sgemm narrows each call to g_openblas_threads: openblas_get_num_threads() (the
  // OpenMP count) is not what its calls use.
  return fmt::format(
             "OpenBLAS {} ({} build, {} thread{} a call); oneDNN {}.{}.{} (cpu runtime {}); "
             "OpenMP {} threads; sgemm by {}",
             openblas_get_config(), mode >= 0 && mode <= 2 ? parallel[mode] : "unknown",
             g_openblas_threads, g_openblas_threads == 1 ? "" : "s", v->major, v->minor, v->patch,
             v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other", omp_get_max_threads(),
             describe_gemm_routing(g_gemm_routing)) +
         fmt::format("; OpenMP waits {}",
                     std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "default");
}

namespace {

void onednn_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc) {
  // Deterministic mode: oneDNN's sgemm on several threads may cut K among them and add their
  // partial products (a weight gradient's long K over the minibatch), so it runs on one thread.
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool narrow = threads > 1 && deterministic();
  if (narrow) omp_set_num_threads(1);
  dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a,
                                    lda, b, ldb, beta, c, ldc);
  if (narrow) omp_set_num_threads(threads);
  HFTA_CHECK(status == dnnl_success, "oneDNN sgemm failed with status {} (m={} n={} k={})",
             static_cast<int>(status), m, n, k);
}

SgemmPanels g_sgemm_panels = SgemmPanels::kAuto;

// The rows of a panel copy lie (width + 16) floats apart: never a multiple of 512.
constexpr int64_t kPanelPad = 16;

// Each thread's panel buffer (an arena: on a cache line), kept between calls and grown to the
// largest panel it has held (at most about 2 MiB, sgemm_panel_width).
float* panel_buffer(size_t floats) {
  thread_local Arena buffer;
  const size_t bytes = floats * sizeof(float);
  if (buffer.capacity() < bytes) buffer = Arena(bytes, "sgemm panel buffer");
  return reinterpret_cast<float*>(buffer.data());
}

// C's columns [c0, c0 + cols) from a copy of B's.
void sgemm_panel(int64_t m, int64_t cols, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc, int64_t c0,
                 int64_t width) {
  const int64_t ld = width + kPanelPad;
  float* panel = panel_buffer(static_cast<size_t>(k * ld));
  for (int64_t r = 0; r < k; ++r)
    std::memcpy(panel + r * ld, b + r * ldb + c0, static_cast<size_t>(cols) * sizeof(float));
  onednn_sgemm(false, false, m, cols, k, alpha, a, lda, panel, ld, beta, c + c0, ldc);
}

void sgemm_in_panels(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t width = sgemm_panel_width(k);
  const int64_t panels = (n + width - 1) / width;
  // A panel of one column would be a matrix-vector product, which oneDNN sums in another order:
  // a last column left alone goes with 16 of the panel before it.
  const bool lone_last_column = panels > 1 && n - (panels - 1) * width == 1;
  auto run = [&](int64_t p) {
    int64_t c0 = p * width, cols = std::min(width, n - c0);
    if (lone_last_column && p == panels - 2) cols -= 16;
    if (lone_last_column && p == panels - 1) c0 -= 16, cols += 16;
    sgemm_panel(m, cols, k, alpha, a, lda, b, ldb, beta, c, ldc, c0, width);
  };
  // Called outside a parallel region with several threads, the panels share them, each a
  // single-threaded product (the bits of the whole product on one thread); one panel gets them
  // all, as the direct call would.
  if (panels > 1 && !omp_in_parallel() && omp_get_max_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels; ++p) run(p);
    return;
  }
  for (int64_t p = 0; p < panels; ++p) run(p);
}

}  // namespace

void set_sgemm_panels(SgemmPanels mode) { g_sgemm_panels = mode; }
SgemmPanels sgemm_panels() { return g_sgemm_panels; }

bool sgemm_copies_b_in_panels(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t ldb) {
  if (trans_a || trans_b || ldb % 512 != 0 ||
      g_gemm_routing[gemm_case(false, false)] != GemmBackend::kOneDnn)
    return false;
  switch (g_sgemm_panels) {
    case SgemmPanels::kAlways:
      return true;
    case SgemmPanels::kNever:
      return false;
    case SgemmPanels::kAuto:
      break;
  }
  return m >= 32 && m < 1024 && n >= 64 && !onednn_has_avx512_kernels();
}

int64_t sgemm_panel_width(int64_t k) {
  constexpr int64_t kBudgetFloats = (int64_t{2} << 20) / sizeof(float);
  for (const int64_t width : {256, 128})
    if (k * (width + kPanelPad) <= kBudgetFloats) return width;
  return 64;
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (g_gemm_routing[gemm_case(trans_a, trans_b)] == GemmBackend::kOpenBlas) {
    openblas_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (sgemm_copies_b_in_panels(trans_a, trans_b, m, n, ldb)) {
    sgemm_in_panels(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  onednn_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void openblas_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) {
  // OpenBLAS's OpenMP build follows this thread's OpenMP thread count (openblas_set_num_threads
  // would set OpenMP's too), so one thread is asked for around the call.
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool narrow = threads > g_openblas_threads;
  if (narrow) omp_set_num_threads(g_openblas_threads);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
  if (narrow) omp_set_num_threads(threads);
}

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One stream per thread: a oneDNN stream must not take work from two threads at once, and plans
// that run whole models per thread (models/plan.h) call oneDNN from several threads.
dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
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
