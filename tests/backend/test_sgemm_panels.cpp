// cpu::sgemm's NN products with B's rows a multiple of 2 KiB apart, copied a panel of columns at a
// time (backend/cpu/runtime.h, SgemmPanels): the same bits as the direct oneDNN call, for panel
// counts on both sides of every width and tail (a last panel of one column included), on one
// thread and shared by two, and the rule that picks them.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/runtime.h"
#include "core/arena.h"
#include "test_util.h"

namespace hfta {
namespace {

using cpu::GemmBackend;
using cpu::SgemmPanels;

// Restores the runtime's settings a test changes.
struct SavedRuntime {
  cpu::GemmRouting routing = cpu::gemm_routing();
  SgemmPanels panels = cpu::sgemm_panels();
  int threads = omp_get_max_threads();
  ~SavedRuntime() {
    cpu::set_gemm_routing(routing);
    cpu::set_sgemm_panels(panels);
    cpu::set_num_threads(threads);
  }
};

struct Case {
  int64_t m, n, k, ldb;
  float alpha, beta;
};

// The operands, each starting on a cache line as the arenas' tensors do.
struct Operands {
  Arena a_arena, b_arena;
  float *a, *b;
  std::vector<float> c_start;  // C before the call: garbage where beta = 0
  Operands(const Case& c, uint64_t seed)
      : a_arena(static_cast<size_t>(c.m * c.k) * sizeof(float)),
        b_arena(static_cast<size_t>(c.k * c.ldb) * sizeof(float)),
        a(a_arena.carve(Shape{c.m, c.k}).data),
        b(b_arena.carve(Shape{c.k, c.ldb}).data) {
    RngStream rng(seed, 0);
    for (int64_t i = 0; i < c.m * c.k; ++i) a[i] = rng.uniform(-1.0f, 1.0f);
    for (int64_t i = 0; i < c.k * c.ldb; ++i) b[i] = rng.uniform(-1.0f, 1.0f);
    c_start.resize(static_cast<size_t>(c.m * c.n));
    for (float& v : c_start)
      v = c.beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : rng.uniform(-1.0f, 1.0f);
  }
  std::vector<float> run(const Case& c, SgemmPanels mode, int threads) const {
    cpu::set_sgemm_panels(mode);
    cpu::set_num_threads(threads);
    std::vector<float> out = c_start;
    cpu::sgemm(false, false, c.m, c.n, c.k, c.alpha, a, c.k, b, c.ldb, c.beta, out.data(), c.n);
    return out;
  }
};

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST(SgemmPanels, GiveTheBitsOfTheDirectCallOnOneAndTwoThreads) {
  SavedRuntime saved;
  cpu::set_gemm_backend(GemmBackend::kOneDnn);
  std::vector<Case> cases;
  // Widths 256 (k = 1, 17, 300), 128 (k = 3136) and 64 (k = 4000); n on both sides of one and of
  // two panels and of the 16-float vector width; ldb 512 and 1024 (2 and 4 KiB rows).
  for (const int64_t k : {1, 17, 300})
    for (const int64_t n : {64, 255, 256, 257, 512}) cases.push_back({64, n, k, 512, 1.0f, 0.0f});
  for (const int64_t n : {127, 128, 129, 300, 1024})
    cases.push_back({33, n, 3136, 1024, 0.5f, 1.0f});
  for (const int64_t m : {32, 100})
    for (const int64_t n : {63, 64, 65, 200})
      cases.push_back({m, n, 4000, 512, 1.0f, m == 32 ? 0.0f : 1.0f});
  cases.push_back({1, 1024, 64, 1024, 1.0f, 0.0f});  // kAuto leaves these; kAlways must not fail
  cases.push_back({2048, 64, 8, 2048, 2.0f, 1.0f});
  for (const Case& c : cases) {
    const uint64_t seed =
        test::case_seed(fmt::format("{}x{}x{} ldb {} beta {}", c.m, c.n, c.k, c.ldb, c.beta));
    HFTA_CASE_TRACE(seed);
    SCOPED_TRACE(fmt::format("m={} n={} k={} ldb={} alpha={} beta={} (panel width {})", c.m, c.n,
                             c.k, c.ldb, c.alpha, c.beta, cpu::sgemm_panel_width(c.k)));
    const Operands ops(c, seed);
    const std::vector<float> direct = ops.run(c, SgemmPanels::kNever, 1);
    for (const float v : direct) ASSERT_TRUE(std::isfinite(v)) << "C's garbage survived the call";
    EXPECT_TRUE(same_bits(ops.run(c, SgemmPanels::kAlways, 1), direct)) << "one thread";
    // Several panels share the threads, each on one; a single panel is one call on both.
    const bool one_panel = c.n <= cpu::sgemm_panel_width(c.k);
    EXPECT_TRUE(same_bits(ops.run(c, SgemmPanels::kAlways, 2),
                          one_panel ? ops.run(c, SgemmPanels::kNever, 2) : direct))
        << "two threads";
  }
}

TEST(SgemmPanels, InsideAParallelRegionEachThreadUsesItsOwnBuffer) {
  SavedRuntime saved;
  cpu::set_gemm_backend(GemmBackend::kOneDnn);
  const Case c{64, 300, 700, 1024, 1.0f, 0.0f};
  const Operands ops(c, test::case_seed("parallel"));
  const std::vector<float> direct = ops.run(c, SgemmPanels::kNever, 1);
  cpu::set_sgemm_panels(SgemmPanels::kAlways);
  cpu::set_num_threads(2);
  std::vector<std::vector<float>> outs(4, ops.c_start);
#pragma omp parallel for schedule(static, 1) num_threads(2)
  for (int i = 0; i < 4; ++i)
    cpu::sgemm(false, false, c.m, c.n, c.k, c.alpha, ops.a, c.k, ops.b, c.ldb, c.beta,
               outs[static_cast<size_t>(i)].data(), c.n);
  for (const auto& out : outs) EXPECT_TRUE(same_bits(out, direct));
}

TEST(SgemmPanels, RuleTakesOnlyOneDnnNnProductsWithRowsTwoKibApart) {
  SavedRuntime saved;
  cpu::set_gemm_backend(GemmBackend::kOneDnn);
  cpu::set_sgemm_panels(SgemmPanels::kAlways);
  EXPECT_TRUE(cpu::sgemm_copies_b_in_panels(false, false, 64, 1024, 1024));
  EXPECT_TRUE(cpu::sgemm_copies_b_in_panels(false, false, 64, 512, 2048));
  EXPECT_FALSE(cpu::sgemm_copies_b_in_panels(false, false, 64, 1000, 1000));
  EXPECT_FALSE(cpu::sgemm_copies_b_in_panels(false, false, 64, 768, 768));
  EXPECT_FALSE(cpu::sgemm_copies_b_in_panels(true, false, 64, 1024, 1024));
  EXPECT_FALSE(cpu::sgemm_copies_b_in_panels(false, true, 64, 1024, 1024));
  cpu::set_sgemm_panels(SgemmPanels::kNever);
  EXPECT_FALSE(cpu::sgemm_copies_b_in_panels(false, false, 64, 1024, 1024));
  cpu::set_sgemm_panels(SgemmPanels::kAuto);
  // Measured on AVX2 (docs/benchmarks.md): rows of 32 to 1023, at least 64 columns.
  const bool avx2 = !cpu::onednn_has_avx512_kernels();
  EXPECT_EQ(cpu::sgemm_copies_b_in_panels(false, false, 64, 1024, 1024), avx2);
  EXPECT_EQ(cpu::sgemm_copies_b_in_panels(false, false, 32, 64, 512), avx2);
  EXPECT_EQ(cpu::sgemm_copies_b_in_panels(false, false, 1023, 4096, 4096), avx2);
  EXPECT_FALSE(cpu::sgemm_copies_b_in_panels(false, false, 16, 1024, 1024));
  EXPECT_FALSE(cpu::sgemm_copies_b_in_panels(false, false, 1024, 1024, 1024));
  EXPECT_FALSE(cpu::sgemm_copies_b_in_panels(false, false, 64, 63, 1024));
  cpu::set_gemm_backend(GemmBackend::kOpenBlas);  // OpenBLAS packs B itself
  EXPECT_FALSE(cpu::sgemm_copies_b_in_panels(false, false, 64, 1024, 1024));
}

TEST(SgemmPanels, WidthKeepsAPanelNearTwoMib) {
  EXPECT_EQ(cpu::sgemm_panel_width(1), 256);
  EXPECT_EQ(cpu::sgemm_panel_width(1927), 256);  // 1927 rows of 272 floats: just under 2 MiB
  EXPECT_EQ(cpu::sgemm_panel_width(1928), 128);
  EXPECT_EQ(cpu::sgemm_panel_width(3136), 128);  // LeNet's fc1
  EXPECT_EQ(cpu::sgemm_panel_width(3641), 64);
  for (const int64_t k : {1, 1000, 1927, 1928, 3640, 3641})
    EXPECT_LE(k * (cpu::sgemm_panel_width(k) + 16) * 4, int64_t{2} << 20) << "k = " << k;
}

}  // namespace
}  // namespace hfta
