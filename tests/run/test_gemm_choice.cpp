// Which sgemm library runs each transposition case: backend/cpu/gemm_timing.h's measurement and
// rule, the routing in backend/cpu/runtime.h, and choose_gemm_library (run/plan_cache.h)
// through the hfta command: measured once and cached, the cached routing used, HFTA_GEMM naming
// one library, a bad HFTA_GEMM an error.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/gemm_timing.h"
#include "core/error.h"
#include "test_files.h"

namespace hfta {
namespace {

using cpu::gemm_case;
using cpu::GemmBackend;
using cpu::GemmCaseTiming;
using cpu::GemmRouting;

constexpr size_t kNT = gemm_case(false, true), kTN = gemm_case(true, false);
constexpr GemmBackend kOneDnn = GemmBackend::kOneDnn, kOpenBlas = GemmBackend::kOpenBlas;

TEST(GemmLibrary, RatioIsTotalTimePerCaseAndCloseTimesKeepOneDnn) {
  // Total time, not a mean of ratios: the large layer decides, as in a training step.
  const std::vector<GemmCaseTiming> timings = {{kTN, "TN large", 10.0, 5.0},
                                               {kTN, "TN small", 0.1, 0.3},
                                               {kNT, "NT large", 10.0, 9.6},
                                               {kNT, "NT small", 0.1, 0.1}};
  EXPECT_NEAR(cpu::openblas_time_ratio(timings, kTN), 5.3 / 10.1, 1e-12);
  EXPECT_NEAR(cpu::openblas_time_ratio(timings, kNT), 9.7 / 10.1, 1e-12);
  EXPECT_EQ(cpu::faster_gemm_routing(timings), (GemmRouting{kOneDnn, kOneDnn, kOpenBlas, kOneDnn}));
  EXPECT_EQ(cpu::faster_gemm_routing({{kTN, "a", 10.0, 9.4}, {kNT, "a", 10.0, 9.4}}),
            (GemmRouting{kOneDnn, kOpenBlas, kOpenBlas, kOneDnn}))
      << "NN and TT stay on oneDNN whatever the others measure";
  EXPECT_EQ(cpu::faster_gemm_routing({{kTN, "a", 10.0, 30.0}, {kNT, "a", 10.0, 10.0}}),
            (GemmRouting{kOneDnn, kOneDnn, kOneDnn, kOneDnn}));
  EXPECT_THROW(cpu::openblas_time_ratio(timings, gemm_case(false, false)), Error);
  EXPECT_THROW(cpu::openblas_time_ratio({{kTN, "a", 0.0, 1.0}}, kTN), Error);
}

TEST(GemmLibrary, NamesReadBack) {
  for (GemmBackend b : {kOneDnn, kOpenBlas})
    EXPECT_EQ(cpu::parse_gemm_backend(cpu::gemm_backend_name(b)), b);
  try {
    cpu::parse_gemm_backend("mkl");
    FAIL() << "mkl was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("onednn or openblas"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cpu::describe_gemm_routing({kOneDnn, kOneDnn, kOneDnn, kOneDnn}), "oneDNN");
  EXPECT_EQ(cpu::describe_gemm_routing({kOneDnn, kOneDnn, kOpenBlas, kOneDnn}),
            "oneDNN (NN, NT, TT) and OpenBLAS (TN)");
}

TEST(GemmLibrary, RoutesEachCaseAndOnlyExactLibrariesAreCutIntoBlocks) {
  const GemmRouting saved = cpu::gemm_routing();
  cpu::set_gemm_routing({kOneDnn, kOneDnn, kOpenBlas, kOneDnn});
  EXPECT_TRUE(cpu::sgemm_blocks_are_exact(false, false));
  EXPECT_FALSE(cpu::sgemm_blocks_are_exact(true, false));
  EXPECT_FALSE(cpu::sgemm_blocks_are_exact(false, true));  // oneDNN's NT: not exact either
  cpu::set_gemm_backend(kOpenBlas);
  EXPECT_FALSE(cpu::sgemm_blocks_are_exact(false, false));
  cpu::set_gemm_routing(saved);
}

TEST(GemmLibrary, TimesBothLibrariesOnEveryShapeAndRestoresTheRuntime) {
  const int threads = omp_get_max_threads();
  const GemmRouting saved = cpu::gemm_routing();
  const GemmRouting mixed = {kOpenBlas, kOneDnn, kOpenBlas, kOneDnn};
  cpu::set_gemm_routing(mixed);
  const std::vector<GemmCaseTiming> timings = cpu::time_gemm_libraries();
  EXPECT_EQ(cpu::gemm_routing(), mixed);
  EXPECT_EQ(omp_get_max_threads(), threads);
  cpu::set_gemm_routing(saved);
  ASSERT_GE(timings.size(), 8u);
  std::set<std::string> shapes;
  size_t per_case[4] = {0, 0, 0, 0};
  for (const GemmCaseTiming& t : timings) {
    shapes.insert(t.shape);
    ASSERT_LT(t.gemm_case, 4u);
    ++per_case[t.gemm_case];
    EXPECT_EQ(t.shape.substr(0, 2), cpu::gemm_case_name(t.gemm_case));
    EXPECT_GT(t.onednn_ms, 0.0) << t.shape;
    EXPECT_GT(t.openblas_ms, 0.0) << t.shape;
  }
  EXPECT_EQ(shapes.size(), timings.size());
  EXPECT_EQ(per_case[kNT], per_case[kTN]);
  EXPECT_EQ(per_case[kNT] + per_case[kTN], timings.size());
}

// The cutting rule at work: with OpenBLAS on every case a forward pass at fewer models than
// threads is one call per model (OpenBLAS's blocks are not exact), and gives what one thread
// gives, bit for bit.
// The start-up line gives the threads an OpenBLAS call runs on (one), not OpenMP's count, which
// openblas_get_num_threads() would report.
TEST(GemmLibrary, RuntimeLineGivesOpenBlasThreadsPerCall) {
  const int threads = omp_get_max_threads();
  cpu::set_num_threads(2);
  const std::string line = cpu::describe_runtime();
  cpu::set_num_threads(threads);
  EXPECT_NE(line.find("build, 1 thread a call)"), std::string::npos) << line;
  EXPECT_NE(line.find("OpenMP 2 threads"), std::string::npos) << line;
}

TEST(GemmLibrary, OpenBlasForwardIsTheSameOnOneAndTwoThreads) {
  const GemmRouting saved = cpu::gemm_routing();
  const int threads = omp_get_max_threads();
  cpu::set_gemm_backend(kOpenBlas);
  const int64_t m = 250, k = 77, n = 300;  // blocks of 16 columns would cut n unevenly
  std::vector<float> a(m * k), b(k * n), one(m * n, -7.0f), two(m * n, 7.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i));
  cpu::set_num_threads(1);
  cpu::sgemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, one.data(), n);
  cpu::set_num_threads(2);
  cpu::sgemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, two.data(), n);
  cpu::set_num_threads(threads);
  cpu::set_gemm_routing(saved);
  EXPECT_EQ(one, two);
}

// Sets an environment variable for the test's lifetime (unset when `value` is null).
struct ScopedEnv {
  std::string name;
  bool had = false;
  std::string before;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) {
    if (const char* p = std::getenv(name.c_str())) had = true, before = p;
    if (value)
      setenv(name.c_str(), value, 1);
    else
      unsetenv(name.c_str());
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), before.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

// The routing a `hfta train` run says it used ("sgemm by oneDNN (NN, NT, TT) and OpenBLAS (TN);"
// in its runtime line).
std::string routing_used(const test::CommandResult& r) {
  const size_t at = r.out.rfind("sgemm by ");
  if (at == std::string::npos) return "none";
  const size_t from = at + 9;
  return r.out.substr(from, r.out.find(';', from) - from);
}

TEST(GemmLibraryCli, MeasuredOnceThenTheCachedRoutingRunsAndHftaGemmOverrides) {
  test::TempDir tmp("gemm_choice");
  const std::string cache_path = (tmp.path / "plans.json").string();
  ScopedEnv cache_env("HFTA_PLAN_CACHE", cache_path.c_str());
  ScopedEnv gemm_env("HFTA_GEMM", nullptr);
  const std::string train =
      "train --model mlp --dataset synthetic --epochs 1 --iters-per-epoch 1 "
      "--batch-size 16 --no-progress --out " +
      tmp.str();

  test::CommandResult first = test::run_hfta(train);
  ASSERT_EQ(first.exit_code, 0) << first.output();
  EXPECT_NE(first.out.find("sgemm libraries: timed"), std::string::npos) << first.out;
  nlohmann::json cache = nlohmann::json::parse(std::ifstream(cache_path));
  std::string key;
  for (auto& [k, entry] : cache.items())
    if (k.find("sgemm libraries") != std::string::npos) key = k;
  ASSERT_FALSE(key.empty()) << cache.dump(2);
  auto routing_of = [&] {
    GemmRouting r = {kOneDnn, kOneDnn, kOneDnn, kOneDnn};
    for (size_t c : {kNT, kTN})
      r[c] = cpu::parse_gemm_backend(cache[key]["routing"][cpu::gemm_case_name(c)]);
    return r;
  };
  EXPECT_EQ(routing_used(first), cpu::describe_gemm_routing(routing_of())) << first.out;
  EXPECT_EQ(cache[key]["timings_ms"].size(), cpu::time_gemm_libraries().size());

  // The cached routing is used without measuring again (here, the other library for TN, as if
  // the cache had been measured so).
  const std::string measured_tn = cache[key]["routing"]["TN"];
  cache[key]["routing"]["TN"] = measured_tn == "onednn" ? "openblas" : "onednn";
  std::ofstream(cache_path) << cache.dump(2);
  test::CommandResult cached = test::run_hfta(train);
  ASSERT_EQ(cached.exit_code, 0) << cached.output();
  EXPECT_EQ(cached.out.find("sgemm libraries: timed"), std::string::npos) << cached.out;
  EXPECT_EQ(routing_used(cached), cpu::describe_gemm_routing(routing_of())) << cached.out;

  {
    ScopedEnv named("HFTA_GEMM", "openblas");
    test::CommandResult r = test::run_hfta(train);
    ASSERT_EQ(r.exit_code, 0) << r.output();
    EXPECT_EQ(routing_used(r), "OpenBLAS") << r.out;
  }
  {
    ScopedEnv bad("HFTA_GEMM", "mkl");
    test::expect_hfta_error(train, "HFTA_GEMM");
  }
  // A malformed entry counts as none: measured again.
  cache[key]["routing"]["TN"] = "mkl";
  std::ofstream(cache_path) << cache.dump(2);
  test::CommandResult remeasured = test::run_hfta(train);
  ASSERT_EQ(remeasured.exit_code, 0) << remeasured.output();
  EXPECT_NE(remeasured.out.find("sgemm libraries: timed"), std::string::npos) << remeasured.out;

  // The key names what was timed and how it was decided: an entry that other shapes made (an
  // older build's) is not read, however well-formed.
  EXPECT_NE(key.find(cpu::describe_gemm_timing()), std::string::npos) << key;
  cache = nlohmann::json::parse(std::ifstream(cache_path));
  std::string older = key;
  older.replace(key.find(cpu::describe_gemm_timing()), cpu::describe_gemm_timing().size(),
                "1 shapes (N=8 8->8), 1 rounds, OpenBLAS below 0.95");
  cache[older] = cache[key];
  cache.erase(key);
  std::ofstream(cache_path) << cache.dump(2);
  test::CommandResult other_shapes = test::run_hfta(train);
  ASSERT_EQ(other_shapes.exit_code, 0) << other_shapes.output();
  EXPECT_NE(other_shapes.out.find("sgemm libraries: timed"), std::string::npos) << other_shapes.out;
}

}  // namespace
}  // namespace hfta
