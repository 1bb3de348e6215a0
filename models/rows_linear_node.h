// A Linear over the last dimension of per-model features [R, F] in the rows layout (each sample
// has R rows: points of a cloud, tokens of a window), run as one fused linear over n*R rows.
// Shared by the point-cloud ops (Conv1d with kernel 1) and the sequence ops (Linear per token);
// internal to models/.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

#include "fused_ops/linear.h"
#include "models/net.h"

namespace hfta {

class RowsLinearNode : public Node {
 public:
  // `description`: what describe() says (e.g. "feat.conv1: Conv1d(3, 64, kernel 1)").
  RowsLinearNode(std::string description, LinearParams p, int64_t rows, int weight, int bias)
      : description_(std::move(description)), p_(p), rows_(rows), weight_(weight), bias_(bias) {}
  std::string describe() const override { return description_; }
  void forward(Net& net, int64_t n, bool) override {
    const LinearParams p = with_rows(n);
    linear_forward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                       .weight = net.param(weight_).value,
                       .bias = bias_ >= 0 ? net.param(bias_).value : TensorView(),
                       .y = net.value(output).reshaped(p.y_shape())});
  }
  void backward(Net& net, int64_t n) override {
    const LinearParams p = with_rows(n);
    InputGrad dx = net.input_grad(*this, 0);
    linear_backward(p, {.x = net.value(inputs[0]).reshaped(p.x_shape()),
                        .weight = net.param(weight_).value,
                        .dy = net.grad(output).reshaped(p.y_shape()),
                        .dx = dx.view.empty() ? dx.view : dx.view.reshaped(p.x_shape()),
                        .dweight = net.param(weight_).grad,
                        .dbias = bias_ >= 0 ? net.param(bias_).grad : TensorView(),
                        .accumulate_dx = dx.accumulate});
  }
  bool accumulates_dx() const override { return true; }
  double forward_flops() const override { return 2.0 * rows_ * p_.in_features * p_.out_features; }
  double backward_flops(bool with_dx) const override {
    return forward_flops() * (with_dx ? 2.0 : 1.0);
  }

 private:
  LinearParams with_rows(int64_t n) const {
    LinearParams p = p_;
    p.N = n * rows_;
    return p;
  }
  std::string description_;
  LinearParams p_;
  int64_t rows_;
  int weight_, bias_;
};

}  // namespace hfta
