// The layers a model is built from: each wraps one fused op for all B models of the array.
//
// Activation layouts (docs/design.md): a layer's per-model features are either [C, H, W], the
// conv family, stored for the whole array as [N, B*C, H, W], or [F], the linear family, stored
// as [B, N, F]. The first layer reads the minibatch itself, [N, ...sample_shape], shared by all
// B models (shared_input): it has no input gradient and the batch is never copied B times.
//
// A layer declares its parameters and saved state in layout(), which the model runs twice
// (counting, then carving real arenas), and keeps the views of the second run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"

namespace hfta {

// One parameter tensor `[B, ...]` and its gradient, carved at the same offset of their arenas.
struct Param {
  std::string name;
  TensorView value;
  TensorView grad;
  // Single-model fan-in: PyTorch's default init draws U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
  // both the weight and the bias of Linear and Conv2d.
  int64_t fan_in = 1;
};

// The arrays' shape for n rows of per-model `features`: [n, B*C, H, W] or [B, n, F].
Shape batch_shape(int64_t B, int64_t n, const Shape& features);

class LayerContext {
 public:
  LayerContext(int64_t B, int64_t capacity, Arena& params, Arena& grads, Arena& state,
               std::vector<Param>& registry)
      : B(B),
        capacity(capacity),
        params_(params),
        grads_(grads),
        state_(state),
        registry_(registry) {}
  const int64_t B;
  const int64_t capacity;  // the most rows a forward will see

  Param add_param(const std::string& name, const Shape& shape, int64_t fan_in);
  template <typename T = float>
  View<T> add_state(const Shape& shape) {
    return state_.carve<T>(shape);
  }

 private:
  Arena &params_, &grads_, &state_;
  std::vector<Param>& registry_;
};

class Layer {
 public:
  virtual ~Layer() = default;
  // A short description, e.g. "Conv2d(1, 32, 5, pad 2)", prefixed to error messages.
  virtual std::string describe() const = 0;
  // Per-model output features for per-model input features `in` (stored for later use). Throws
  // hfta::Error when the input does not fit the layer.
  virtual Shape connect(const Shape& in, bool shared_input) = 0;
  virtual void layout(LayerContext& ctx) {}
  // x: [n, ...] the input as laid out (the minibatch itself when shared_input), y: the output.
  virtual void forward(const TensorView& x, const TensorView& y, int64_t n, bool training) = 0;
  // dy: gradient of y; dx: gradient of x to write, or empty (first layer). Parameter gradients
  // accumulate.
  virtual void backward(const TensorView& x, const TensorView& y, const TensorView& dy,
                        const TensorView& dx, int64_t n) = 0;
  // Multiply-add x2 FLOPs per sample for one model: forward, and backward (weights and, when
  // with_dx, the input gradient). Elementwise layers count 0: they are memory-bound.
  virtual double forward_flops() const { return 0.0; }
  virtual double backward_flops(bool with_dx) const { return 0.0; }
};

std::unique_ptr<Layer> linear(int64_t out_features, bool bias = true);
std::unique_ptr<Layer> conv2d(int64_t out_channels, int64_t kernel, int64_t stride = 1,
                              int64_t pad = 0, bool bias = true);
std::unique_ptr<Layer> max_pool2d(int64_t kernel, int64_t stride = 0);
std::unique_ptr<Layer> relu();
// [C, H, W] -> [C*H*W]: from the conv family's layout to the linear family's.
std::unique_ptr<Layer> flatten();

}  // namespace hfta
