// Fused embedding on the op harness (tests/op_harness.h): fused(B) lookups and scatter-add
// gradients equal B reference single-model runs over the same shared ids (repeated ids,
// padding_idx, D on both sides of the 16-float vectors and of the column slices); reference
// gradients equal finite differences; repeated ids sum by hand; bad ids and shapes raise
// hfta::Error naming the row and the id.
#include <algorithm>
#include <map>

#include "fused_ops/embedding.h"
#include "op_harness.h"

namespace hfta {
namespace {

using test::Buffer;
using test::OpCase;
using test::Role;
using test::TensorSpec;

constexpr double kUnitRoundoff = 1.0 / (1 << 24);

struct EmbP {
  int64_t B = 1;
  int64_t R = 1, V = 1, D = 1;
  std::optional<int64_t> padding_idx{};
  EmbeddingParams params() const { return {B, R, V, D, padding_idx}; }
};

struct EmbeddingOp {
  using Params = EmbP;
  static std::string describe(const EmbP& q) {
    return fmt::format("R={} V={} D={} padding_idx={}", q.R, q.V, q.D, q.padding_idx.value_or(-1));
  }
  static std::vector<TensorSpec> tensors(const EmbP& q, const OpCase<EmbP>& c) {
    const EmbeddingParams p = q.params();
    return {
        {.name = "weight", .shape = p.weight_shape()},
        {.name = "ids",
         .shape = p.ids_shape(),
         .layout = test::Layout::kShared,
         .lo = 0.0f,
         .hi = float(p.V),
         .is_index = true},
        {.name = "dy", .shape = p.y_shape()},
        {.name = "y", .shape = p.y_shape(), .role = Role::kOutput, .atol = 0.0, .rtol = 0.0},
        {.name = "dweight", .shape = p.weight_shape(), .role = Role::kParamGrad},
    };
  }
  // y is a copy: exact. dweight: the fast kernel adds a token's c dy rows (|dy| <= 1) one by one
  // in float onto its start (|start| <= 1), each sum rounded (<= u (1 + k) at the k-th); the
  // reference sums in double and rounds once (u (1 + c)). c is the most repeated id's count.
  static std::pair<double, double> tolerance(const EmbP& q, const test::Views& v,
                                             const TensorSpec& s) {
    if (s.name != "dweight") return {s.atol, s.rtol};
    std::map<int32_t, int64_t> count;
    int64_t c = 0;
    const IndexView ids = v.index("ids");
    for (int64_t r = 0; r < ids.numel(); ++r) c = std::max(c, ++count[ids.data[r]]);
    return {kUnitRoundoff * double((c + 2) * (c + 2)), 0.0};
  }
  static void run(const EmbP& q, const test::Views& v, const test::RunContext& ctx) {
    const EmbeddingParams p = q.params();
    (ctx.ref ? ref::embedding_forward : embedding_forward)(
        p, {.weight = v("weight"), .ids = v.index("ids"), .y = v("y")});
    if (ctx.forward_only) return;
    (ctx.ref ? ref::embedding_backward : embedding_backward)(
        p, {.ids = v.index("ids"), .dy = v("dy"), .dweight = v("dweight")});
  }
  static std::vector<std::pair<std::string, std::string>> loss_pairs() { return {{"y", "dy"}}; }
  static std::vector<std::pair<std::string, std::string>> grad_pairs() {
    return {{"weight", "dweight"}};
  }
  // L = sum(y * dy) is linear in weight: no truncation error; rounding ~ 2^-24 |L| / eps.
  static std::tuple<double, double, double> fd_tolerance() { return {1e-2, 1e-4, 1e-4}; }
};

// Small vocabularies repeat ids many times; D below, at and above 16-float vectors and across
// the backward's column slices (one per thread when B < threads); padding_idx on and off.
std::vector<OpCase<EmbP>> embedding_cases() {
  struct Size {
    int64_t R, V, D;
    std::optional<int64_t> padding_idx;
  };
  const Size sizes[] = {
      {1, 1, 1, {}},      {5, 3, 7, {}},    {40, 5, 16, {}}, {40, 5, 16, 0},
      {33, 100, 17, {}},  {64, 10, 128, 3}, {17, 4, 15, {}}, {32, 50, 33, 49},
      {96, 1000, 65, {}}, {20, 7, 200, {}}, {3, 2, 5, 1},  // the last: differences
  };
  std::vector<OpCase<EmbP>> cases;
  int k = 0;
  for (const Size& s : sizes)
    for (int64_t B : test::model_counts()) {
      OpCase<EmbP> c;
      c.p = EmbP{.R = s.R, .V = s.V, .D = s.D, .padding_idx = s.padding_idx};
      c.B = B;
      c.threads = 1 + (k++ % 2);
      c.fd = B == 1 && s.V * s.D <= 30 && !s.padding_idx;
      c.name = fmt::format("R{}_V{}_D{}{}_B{}_t{}{}", s.R, s.V, s.D,
                           s.padding_idx ? fmt::format("_pad{}", *s.padding_idx) : "", B, c.threads,
                           c.fd ? "_fd" : "");
      cases.push_back(c);
    }
  return cases;
}

class EmbeddingHarness : public ::testing::TestWithParam<OpCase<EmbP>> {};
TEST_P(EmbeddingHarness, FusedEqualsSerial) { test::run_case<EmbeddingOp>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, EmbeddingHarness, ::testing::ValuesIn(embedding_cases()),
                         test::CaseName());
// The same shapes on the GPU (skipped without one).
INSTANTIATE_TEST_SUITE_P(OnCuda, EmbeddingHarness,
                         ::testing::ValuesIn(test::device_cases<EmbeddingOp>(embedding_cases(),
                                                                             Device::kCuda)),
                         test::CaseName());

IndexView id_view(std::vector<int32_t>& ids) {
  return IndexView(ids.data(), Shape{static_cast<int64_t>(ids.size())});
}

// Repeated ids add up; the padding row keeps its gradient; other rows untouched; exact here.
TEST(Embedding, RepeatedIdsSumAndPaddingGetsNoGradient) {
  for (bool fast : {true, false}) {
    SCOPED_TRACE(fast ? "fast" : "reference");
    const EmbeddingParams p{.B = 2, .R = 5, .V = 4, .D = 3, .padding_idx = 0};
    std::vector<int32_t> ids = {2, 0, 2, 2, 1};
    Buffer dy(p.y_shape()), dweight(p.weight_shape(), 0.5f);
    for (int64_t i = 0; i < dy.numel(); ++i) {
      const int64_t row = i / p.D;
      dy.values[i] = float(row + 1);
    }
    (fast ? embedding_backward : ref::embedding_backward)(
        p, {.ids = id_view(ids), .dy = dy.view(), .dweight = dweight.view()});
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t d = 0; d < p.D; ++d) {
        const float row = float(b * p.R);  // model b's dy rows are numbered from b * R + 1
        auto at = [&](int64_t v) { return dweight.values[(b * p.V + v) * p.D + d]; };
        EXPECT_EQ(at(0), 0.5f);                                      // padding
        EXPECT_EQ(at(1), 0.5f + (row + 5));                          // row 4
        EXPECT_EQ(at(2), 0.5f + (row + 1) + (row + 3) + (row + 4));  // rows 0, 2, 3
        EXPECT_EQ(at(3), 0.5f);                                      // never seen
      }
  }
}

TEST(Embedding, BadIdsAndShapesRaiseClearErrors) {
  const EmbeddingParams p{.B = 2, .R = 3, .V = 5, .D = 4};
  Buffer weight(p.weight_shape()), y(p.y_shape());
  auto message = [&](const EmbeddingParams& q, std::vector<int32_t> ids, TensorView w) {
    try {
      embedding_forward(q, {.weight = w, .ids = id_view(ids), .y = y.view()});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto expect_message = [](const std::string& got, const std::string& want) {
    EXPECT_NE(got.find(want), std::string::npos) << got;
  };
  expect_message(message(p, {0, 4, 5}, weight.view()),
                 "embedding id 5 at row 2 is outside [0, V=5)");
  expect_message(message(p, {-1, 4, 3}, weight.view()),
                 "embedding id -1 at row 0 is outside [0, V=5)");
  EXPECT_EQ(message(p, {0, 4, 3}, weight.view()), "no error");
  expect_message(message(p, {0, 1}, weight.view()), "embedding ids has shape [2], expected [3]");
  Buffer wrong(Shape{2, 4, 4});
  expect_message(message(p, {0, 1, 2}, wrong.view()),
                 "embedding weight has shape [2, 4, 4], expected [2, 5, 4]");
  EmbeddingParams bad = p;
  bad.padding_idx = 5;
  expect_message(message(bad, {0, 1, 2}, weight.view()),
                 "embedding padding_idx is 5, expected a token id in [0, V=5)");
  bad = p;
  bad.D = 0;
  expect_message(message(bad, {0, 1, 2}, weight.view()), "embedding sizes must be positive");
  std::vector<int32_t> ids = {0, 7, 1};
  EXPECT_THROW(
      embedding_backward(p, {.ids = id_view(ids), .dy = y.view(), .dweight = weight.view()}),
      Error);
  ids = {0, 1, 2};
  EXPECT_THROW(
      embedding_backward(p, {.ids = id_view(ids), .dy = weight.view(), .dweight = y.view()}),
      Error);
}

}  // namespace
}  // namespace hfta
