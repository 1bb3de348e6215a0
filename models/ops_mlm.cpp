// The masked-LM op a Net records (net.h, "Sequence ops"): gather_tokens, which picks the token
// rows a masked language model predicts so that its output layer and cross-entropy run on those
// rows only (models/masked_lm.h).
#include <fmt/format.h>

#include "core/error.h"
#include "fused_ops/gather_tokens.h"
#include "models/net.h"

namespace hfta {

namespace {

// out[b, r] = x[b, rows[r]] over the window's n*K packed rows (rows[r] < 0: a zero row);
// backward adds dy[b, r] into dx[b, rows[r]] (fused_ops/gather_tokens.h, on any device).
class GatherTokensNode : public Node {
 public:
  GatherTokensNode(int64_t T, int64_t K, int64_t D) : T_(T), K_(K), D_(D) {}
  std::string describe() const override {
    return fmt::format("GatherTokens({} of {} rows per sequence, {} features)", K_, T_, D_);
  }
  void forward(Net& net, int64_t n, bool) override {
    const GatherTokensParams p = params(net, n);
    gather_tokens_forward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                              .rows = net.index_value(inputs[1]).leading(p.rows_shape()),
                              .y = net.value(output).reshaped(p.y_shape())});
  }
  void backward(Net& net, int64_t n) override {
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    const GatherTokensParams p = params(net, n);
    gather_tokens_backward(p, {.rows = net.index_value(inputs[1]).leading(p.rows_shape()),
                               .dy = net.grad(output).reshaped(p.y_shape()),
                               .dx = dx.view.reshaped(p.x_shape()),
                               .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }

 private:
  GatherTokensParams params(const Net& net, int64_t n) const {
    return {.B = net.B(), .R = n * T_, .K = n * K_, .D = D_};
  }
  int64_t T_, K_, D_;
};

}  // namespace

Value Net::gather_tokens(Value x, Value rows) {
  HFTA_CHECK(!shared(x) && layout(x) == Layout::kRows && features(x).rank() == 2,
             "GatherTokens needs per-model token features [T, D], got {}", features(x).str());
  HFTA_CHECK(shared(rows) && features(rows).rank() == 1,
             "GatherTokens needs shared row indices [K] (an index_input), got {}",
             features(rows).str());
  const int64_t T = features(x)[0], D = features(x)[1], K = features(rows)[0];
  return add_node(std::make_unique<GatherTokensNode>(T, K, D), {x, rows}, Shape{K, D},
                  Layout::kRows);
}

}  // namespace hfta
