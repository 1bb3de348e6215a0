// Shared test helpers: owned buffers, seeded fills, tolerant comparisons, finite differences,
// reproducible per-case seeds.
//
// Seeds and reproducing a failure:
// - HFTA_TEST_SEED sets the base seed (default 20261122). A test with one seed takes
//   seed_for_test() and prints it through HFTA_SEEDED_TRACE.
// - A table-driven case (tests/op_harness.h) is its own gtest test named after the case, and its
//   seed is case_seed(name): the base seed mixed with a hash of the case's name, so it does not
//   depend on which other cases exist or run. On failure it prints
//     reproduce: HFTA_TEST_SEED=<base> ./build/<test> --gtest_filter='<suite>.<test>/<case>'
//   and that command runs exactly that case, alone, with exactly the same numbers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace hfta::test {

inline uint64_t seed_for_test() {
  const char* env = std::getenv("HFTA_TEST_SEED");
  return env ? std::strtoull(env, nullptr, 10) : 20261122ull;
}

#define HFTA_SEEDED_TRACE(seed) \
  SCOPED_TRACE(::fmt::format("reproduce with HFTA_TEST_SEED={}", seed))

// The seed of the case `name`: seed_for_test() mixed with the name's FNV-1a hash (splitmix64).
inline uint64_t case_seed(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  uint64_t z = seed_for_test() ^ h;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The command that re-runs the current gtest test alone with the current base seed.
inline std::string reproduce_command() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string full =
      info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("*");
  const std::vector<std::string> argv = ::testing::internal::GetArgvs();
  const std::string argv0 = argv.empty() ? "<test>" : argv[0];
  return ::fmt::format("reproduce: HFTA_TEST_SEED={} {} --gtest_filter='{}'", seed_for_test(),
                       argv0, full);
}

#define HFTA_CASE_TRACE(case_seed) \
  SCOPED_TRACE(::fmt::format("{} (case seed {})", ::hfta::test::reproduce_command(), case_seed))

// An owned float buffer with a view of a given shape.
struct Buffer {
  std::vector<float> values;
  Shape shape;
  Buffer() = default;
  explicit Buffer(Shape s, float fill = 0.0f)
      : values(static_cast<size_t>(s.numel()), fill), shape(s) {}
  TensorView view() { return TensorView(values.data(), shape); }
  float* data() { return values.data(); }
  int64_t numel() const { return shape.numel(); }
};

inline void fill_uniform(Buffer& buf, RngStream& rng, float lo = -1.0f, float hi = 1.0f) {
  for (float& v : buf.values) v = rng.uniform(lo, hi);
}

inline Buffer random_buffer(Shape s, RngStream& rng, float lo = -1.0f, float hi = 1.0f) {
  Buffer b(s);
  fill_uniform(b, rng, lo, hi);
  return b;
}

// Elementwise |a - e| <= atol + rtol * |e|; reports the worst element and the count of misses.
inline void expect_close(const float* actual, const float* expected, int64_t n, double atol,
                         double rtol, const std::string& what) {
  int64_t misses = 0, worst = -1;
  double worst_excess = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double a = actual[i], e = expected[i];
    double allowed = atol + rtol * std::fabs(e);
    double err = std::fabs(a - e);
    if (!(err <= allowed)) {  // also catches NaN
      ++misses;
      double excess = std::isnan(err) ? 1e30 : err - allowed;
      if (worst < 0 || excess > worst_excess) worst = i, worst_excess = excess;
    }
  }
  EXPECT_EQ(misses, 0) << what << ": " << misses << " of " << n << " elements differ; worst at "
                       << worst << ": actual " << (worst >= 0 ? actual[worst] : 0.0f)
                       << " expected " << (worst >= 0 ? expected[worst] : 0.0f) << " (atol " << atol
                       << ", rtol " << rtol << ")";
}

inline void expect_close(const Buffer& actual, const Buffer& expected, double atol, double rtol,
                         const std::string& what) {
  ASSERT_EQ(actual.values.size(), expected.values.size()) << what;
  expect_close(actual.values.data(), expected.values.data(), actual.numel(), atol, rtol, what);
}

// Central finite differences of the scalar L = sum(output * weights_of_output) with respect to
// every element of `input`, compared with `analytic`. `forward` recomputes `output` from the
// current `input`. The ops accumulate in double and round once to float, so the difference
// quotient carries about |L| * 2^-24 / eps of rounding error plus O(eps^2) truncation error;
// callers pass a tolerance that covers both for their shapes.
inline void expect_gradient_matches_finite_differences(const std::function<void()>& forward,
                                                       Buffer& input, const Buffer& output,
                                                       const Buffer& output_weights,
                                                       const Buffer& analytic, double eps,
                                                       double atol, double rtol,
                                                       const std::string& what) {
  auto loss = [&] {
    forward();
    double l = 0.0;
    for (int64_t i = 0; i < output.numel(); ++i)
      l += double(output.values[i]) * output_weights.values[i];
    return l;
  };
  Buffer numeric(input.shape);
  for (int64_t i = 0; i < input.numel(); ++i) {
    float saved = input.values[i];
    input.values[i] = saved + static_cast<float>(eps);
    double plus = loss();
    input.values[i] = saved - static_cast<float>(eps);
    double minus = loss();
    input.values[i] = saved;
    numeric.values[i] = static_cast<float>((plus - minus) / (2.0 * eps));
  }
  forward();
  expect_close(analytic, numeric, atol, rtol, what + " vs finite differences");
}

// accumulate_dx: `backward(dx, accumulate)` runs an op's backward into dx. With accumulate =
// false into a NaN-filled dx it gives the gradient g (every element written); with accumulate =
// true into random starting values s it must give s + g (within a few ulps of rounding).
inline void expect_dx_accumulates(const std::function<void(TensorView, bool)>& backward,
                                  const Shape& dx_shape, uint64_t seed, const std::string& what) {
  RngStream rng(seed, 99);
  Buffer g(dx_shape, std::numeric_limits<float>::quiet_NaN());
  backward(g.view(), false);
  Buffer start = random_buffer(dx_shape, rng), acc = start;
  backward(acc.view(), true);
  Buffer want(dx_shape);
  for (int64_t i = 0; i < want.numel(); ++i) want.values[i] = start.values[i] + g.values[i];
  expect_close(acc, want, 1e-6, 1e-6, what + ": accumulate_dx gives start + gradient");
}

// The same models' parameters from two runs: at most `max_outliers` of them differ by more than
// 1e-5, and none by more than `max_difference`.
inline void expect_parameters_close(const std::vector<float>& a, const std::vector<float>& b,
                                    double max_outliers, double max_difference,
                                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int64_t outliers = 0;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (!(err <= 1e-5)) ++outliers;
    if (!(err <= worst)) worst = err;  // NaN makes worst NaN
  }
  EXPECT_LE(static_cast<double>(outliers), max_outliers)
      << what << ": " << outliers << " of " << a.size() << " parameters differ by more than 1e-5";
  EXPECT_LE(worst, max_difference) << what << ": largest difference " << worst;
}

// The same models' parameters after a few Adam steps of two runs (fused and alone, two plans):
// all but 1e-5 of them (or 8, in a small model) within 1e-5, every one within 0.1 lr. Adam divides
// each gradient by its own running magnitude, so a gradient at rounding level moves its parameter
// by a visible fraction of lr in a direction rounding picks, whenever the two runs sum in different
// orders (oneDNN's AVX2 convolutions split a lone model's weight-gradient sum over the threads, not
// that of a model with a thread of its own; docs/benchmarks.md has the sizes seen). A model
// computed with wrong data or hyperparameters differs almost everywhere.
inline void expect_adam_parameters_agree(const std::vector<float>& a, const std::vector<float>& b,
                                         float lr, const std::string& what) {
  expect_parameters_close(a, b, std::max(1e-5 * static_cast<double>(a.size()), 8.0), 0.1 * lr,
                          what + " (lr " + std::to_string(lr) + ")");
}

// Bit for bit, except that any NaN equals any NaN (a GPU's arithmetic returns its canonical NaN,
// not the operand's payload).
inline bool same_bits_or_nan(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

// Fails the test at each of the first 5 elements whose bits differ (any NaN equals any NaN),
// naming `what`, the index and both values: for outputs promised bit for bit.
inline void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                             const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < want.size() && reported < 5; ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) continue;
    ++reported;
    ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
  }
}

inline const std::vector<int64_t>& model_counts() {
  static const std::vector<int64_t> counts = {1, 2, 3, 8};
  return counts;
}

// Runs `call` and expects an hfta::Error whose message contains every one of `parts` and none of
// `absent`; a failure prints the message.
inline void expect_error_containing_all(const std::function<void()>& call,
                                        const std::vector<std::string>& parts,
                                        const std::vector<std::string>& absent = {}) {
  try {
    call();
    ADD_FAILURE() << "expected hfta::Error containing '" << (parts.empty() ? "" : parts.front())
                  << "', nothing thrown";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos)
          << "message lacks '" << part << "': " << message;
    for (const std::string& part : absent)
      EXPECT_EQ(message.find(part), std::string::npos)
          << "message has '" << part << "': " << message;
  }
}
inline void expect_error_containing(const std::function<void()>& call, const std::string& text) {
  expect_error_containing_all(call, {text});
}

// Environment variable `name` set to `value` (unset for null) while it lives, then restored.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace hfta::test
