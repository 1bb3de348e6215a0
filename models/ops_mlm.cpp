// The masked-LM op a Net records (net.h, "Sequence ops"): gather_tokens, which picks the token
// rows a masked language model predicts so that its output layer and cross-entropy run on those
// rows only (models/masked_lm.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "models/net.h"

namespace hfta {

namespace {

// out[b, r] = x[b, rows[r]] over the window's n*K packed rows (rows[r] < 0: a zero row);
// backward adds dy[b, r] into dx[b, rows[r]].
class GatherTokensNode : public Node {
 public:
  GatherTokensNode(int64_t B, int64_t T, int64_t K, int64_t D) : B_(B), T_(T), K_(K), D_(D) {}
  std::string describe() const override {
    return fmt::format("GatherTokens({} of {} rows per sequence, {} features)", K_, T_, D_);
  }
  void forward(Net& net, int64_t n, bool) override {
    const IndexView rows = net.index_value(inputs[1]);
    const float* x = net.value(inputs[0]).data;
    float* y = net.value(output).data;
    const int64_t in_rows = n * T_, out_rows = n * K_;
    for (int64_t r = 0; r < out_rows; ++r) {
      const int32_t i = rows.data[r];
      HFTA_CHECK(i < in_rows, "gathered token row {} is outside the window's {} rows", i, in_rows);
    }
    parallel_for(B_ * out_rows, [&](int64_t br) {
      const int64_t b = br / out_rows, r = br % out_rows;
      const int32_t i = rows.data[r];
      float* dst = y + br * D_;
      if (i < 0)
        std::fill(dst, dst + D_, 0.0f);
      else
        std::memcpy(dst, x + (b * in_rows + i) * D_, static_cast<size_t>(D_) * sizeof(float));
    });
  }
  void backward(Net& net, int64_t n) override {
    InputGrad dx = net.input_grad(*this, 0);
    if (dx.view.empty()) return;
    const IndexView rows = net.index_value(inputs[1]);
    const float* dy = net.grad(output).data;
    const int64_t in_rows = n * T_, out_rows = n * K_;
    if (!dx.accumulate) std::fill(dx.view.data, dx.view.data + B_ * in_rows * D_, 0.0f);
    // Rows are distinct (a position is predicted once), but a parallel loop over models keeps
    // the adds race-free even if they were not.
    parallel_for(B_, [&](int64_t b) {
      for (int64_t r = 0; r < out_rows; ++r) {
        const int32_t i = rows.data[r];
        if (i < 0) continue;
        float* dst = dx.view.data + (b * in_rows + i) * D_;
        const float* src = dy + (b * out_rows + r) * D_;
        for (int64_t d = 0; d < D_; ++d) dst[d] += src[d];
      }
    });
  }
  bool accumulates_dx() const override { return true; }

 private:
  int64_t B_, T_, K_, D_;
};

}  // namespace

Value Net::gather_tokens(Value x, Value rows) {
  HFTA_CHECK(!shared(x) && layout(x) == Layout::kRows && features(x).rank() == 2,
             "GatherTokens needs per-model token features [T, D], got {}", features(x).str());
  HFTA_CHECK(shared(rows) && features(rows).rank() == 1,
             "GatherTokens needs shared row indices [K] (an index_input), got {}",
             features(rows).str());
  const int64_t T = features(x)[0], D = features(x)[1], K = features(rows)[0];
  return add_node(std::make_unique<GatherTokensNode>(B(), T, K, D), {x, rows}, Shape{K, D},
                  Layout::kRows);
}

}  // namespace hfta
