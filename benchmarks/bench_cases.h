// The ops op_bench knows: each case builds its buffers for a given B and returns a closure that
// runs one forward + backward (or one optimizer step), plus its FLOP count and its minimum memory
// traffic for all B models.
//
// FLOP counts follow the op headers' forward_flops() where they exist and are written down per
// case otherwise; for memory-bound ops (optimizers, norms, pooling, activations, the loss) the
// bytes and GB/s are the meaningful figures, and "% of peak" only says how far from compute-bound
// they are. Bytes are the minimum traffic: every tensor a pass reads or writes counted once per
// pass (a kernel that re-reads a tensor from cache pays no extra DRAM traffic, one that re-reads
// it from DRAM shows up as lower GB/s).
#pragma once

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/runtime.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "fused_ops/activation.h"
#include "fused_ops/batchnorm1d.h"
#include "fused_ops/batchnorm2d.h"
#include "fused_ops/conv2d.h"
#include "fused_ops/cross_entropy.h"
#include "fused_ops/layernorm.h"
#include "fused_ops/linear.h"
#include "fused_ops/pool2d.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace hfta::bench {

using Options = std::map<std::string, std::string>;

struct OpCase {
  std::string description;
  double flops = 0.0;  // per call, all B models
  double bytes = 0.0;  // minimum memory traffic per call, all B models (0: not reported)
  std::function<void()> run;
};

inline std::string get_option(const Options& o, const std::string& key,
                              const std::string& fallback = "") {
  auto it = o.find(key);
  return it == o.end() ? fallback : it->second;
}

inline int64_t option(const Options& o, const std::string& key, int64_t fallback) {
  auto it = o.find(key);
  return it == o.end() ? fallback : std::stoll(it->second);
}

inline double option_real(const Options& o, const std::string& key, double fallback) {
  auto it = o.find(key);
  return it == o.end() ? fallback : std::stod(it->second);
}

// Applies the knobs every case accepts: gemm=onednn|openblas, par=auto|models|inside,
// panels=auto|always|never (cpu::SgemmPanels). A knob not given goes back to its value at program
// start (the environment's), so the lines of a problem file do not leak settings into each other.
inline void apply_common_options(const Options& o) {
  static const cpu::GemmRouting initial_gemm = cpu::gemm_routing();
  static const cpu::ModelParallelism initial_par = cpu::model_parallelism();
  std::string gemm = get_option(o, "gemm"), par = get_option(o, "par"),
              panels = get_option(o, "panels");
  HFTA_CHECK(gemm.empty() || gemm == "onednn" || gemm == "openblas",
             "gemm={} is not known: use gemm=onednn or gemm=openblas", gemm);
  HFTA_CHECK(par.empty() || par == "auto" || par == "models" || par == "inside",
             "par={} is not known: use par=auto, par=models or par=inside", par);
  if (gemm.empty())
    cpu::set_gemm_routing(initial_gemm);
  else
    cpu::set_gemm_backend(gemm == "openblas" ? cpu::GemmBackend::kOpenBlas
                                             : cpu::GemmBackend::kOneDnn);
  HFTA_CHECK(panels.empty() || panels == "auto" || panels == "always" || panels == "never",
             "panels={} is not known: use panels=auto, panels=always or panels=never", panels);
  cpu::set_sgemm_panels(panels == "always"  ? cpu::SgemmPanels::kAlways
                        : panels == "never" ? cpu::SgemmPanels::kNever
                                            : cpu::SgemmPanels::kAuto);
  cpu::set_model_parallelism(par.empty()       ? initial_par
                             : par == "models" ? cpu::ModelParallelism::kAcrossModels
                             : par == "inside" ? cpu::ModelParallelism::kInsideOp
                                               : cpu::ModelParallelism::kAuto);
}

inline int num_threads_in_use() { return num_threads(); }

// A bag of seeded buffers that lives as long as the closure that uses it. Each float buffer is
// an arena of its own, so that it starts on a cache line as the models' tensors do: some kernels'
// speed depends on it (oneDNN's sgemm, backend/cpu/runtime.h's SgemmPanels), and a benchmark
// must see what a model sees.
struct Buffers {
  std::vector<Arena> storage;
  std::vector<std::vector<int32_t>> index_storage;
  RngStream rng{7, 0};
  TensorView make(Shape s, float lo = -1.0f, float hi = 1.0f) {
    storage.emplace_back(static_cast<size_t>(s.numel()) * sizeof(float), "op_bench buffer");
    TensorView v = storage.back().carve(s);
    for (int64_t i = 0; i < v.numel(); ++i) v.data[i] = rng.uniform(lo, hi);
    return v;
  }
  // Integers in [0, below).
  IndexView make_index(Shape s, int64_t below) {
    index_storage.emplace_back(static_cast<size_t>(s.numel()));
    for (int32_t& v : index_storage.back()) v = static_cast<int32_t>(rng.below(below));
    return IndexView(index_storage.back().data(), s);
  }
};

constexpr double kF = sizeof(float);

// linear: y = x W + b per model, then dx, dW, db. FLOPs: 3 GEMMs of 2*N*in*out each per model
// (dx skipped for a shared input, which is the network's input); bias terms not counted.
inline OpCase linear_case(int64_t B, const Options& o) {
  LinearParams p{B,
                 option(o, "N", 64),
                 option(o, "in", 784),
                 option(o, "out", 256),
                 option(o, "bias", 1) != 0,
                 option(o, "shared", 0) != 0};
  auto buf = std::make_shared<Buffers>();
  TensorView x = buf->make(p.x_shape()), w = buf->make(p.weight_shape());
  TensorView bias = p.bias ? buf->make(p.bias_shape()) : TensorView();
  TensorView y = buf->make(p.y_shape());
  TensorView dy = buf->make(p.y_shape()), dw = buf->make(p.weight_shape());
  TensorView db = p.bias ? buf->make(p.bias_shape()) : TensorView();
  TensorView dx = p.shared_input ? TensorView() : buf->make(p.x_shape());
  return {fmt::format("N={} {}->{}{}", p.N, p.in_features, p.out_features,
                      p.shared_input ? " shared" : ""),
          3.0 * p.forward_flops() - (p.shared_input ? p.forward_flops() : 0.0), 0.0,
          [=, keep_alive = buf] {
            linear_forward(p, {.x = x, .weight = w, .bias = bias, .y = y});
            linear_backward(p,
                            {.x = x, .weight = w, .dy = dy, .dx = dx, .dweight = dw, .dbias = db});
          }};
}

// conv2d: forward, backward-data, backward-weights (+ bias). FLOPs: 3 x forward_flops() (the
// three are the same multiply-adds reordered); 2 x when the input is shared (a first layer, whose
// input gradient nobody needs, so dx is skipped as in training). Bias terms not counted.
// strategy=grouped|per_model|direct|depthwise|im2col|pointwise|auto sets the CPU backend's
// Conv2dStrategy (auto when not given).
inline OpCase conv2d_case(int64_t B, const Options& o) {
  Conv2dParams p;
  p.B = B;
  p.N = option(o, "N", 64);
  p.in_channels = option(o, "in", 32);
  p.out_channels = option(o, "out", 64);
  p.H = option(o, "H", 14);
  p.W = option(o, "W", p.H);
  p.kernel_h = p.kernel_w = option(o, "k", 3);
  p.stride_h = p.stride_w = option(o, "stride", 1);
  p.pad_h = p.pad_w = option(o, "pad", 0);
  p.dilation_h = p.dilation_w = option(o, "dilation", 1);
  p.groups = option(o, "groups", 1);
  p.bias = option(o, "bias", 1) != 0;
  p.shared_input = option(o, "shared", 0) != 0;
  const cpu::Conv2dStrategy chosen = cpu::parse_conv2d_strategy(get_option(o, "strategy", "auto"));
  cpu::set_conv2d_strategy(chosen);
  check_conv2d_params(p);
  auto buf = std::make_shared<Buffers>();
  TensorView x = buf->make(p.x_shape()), w = buf->make(p.weight_shape(), -0.1f, 0.1f);
  TensorView bias = p.bias ? buf->make(p.bias_shape()) : TensorView();
  TensorView y = buf->make(p.y_shape()), dy = buf->make(p.y_shape());
  TensorView dw = buf->make(p.weight_shape()),
             db = p.bias ? buf->make(p.bias_shape()) : TensorView();
  TensorView dx = p.shared_input ? TensorView() : buf->make(p.x_shape());
  const cpu::Conv2dStrategy runs_as = cpu::conv2d_strategy_for(p);
  return {
      fmt::format(
          "N={} {}->{} {}x{} k{} s{} p{}{}{}{} [{}]", p.N, p.in_channels, p.out_channels, p.H, p.W,
          p.kernel_h, p.stride_h, p.pad_h,
          p.dilation_h > 1 ? fmt::format(" d{}", p.dilation_h) : "",
          p.groups > 1 ? fmt::format(" g{}", p.groups) : "", p.shared_input ? " shared" : "",
          runs_as == cpu::Conv2dStrategy::kGrouped && B == 1 ? std::string_view("single")
                                                             : cpu::conv2d_strategy_name(runs_as)),
      (p.shared_input ? 2.0 : 3.0) * p.forward_flops(), 0.0, [=, keep_alive = buf] {
        cpu::set_conv2d_strategy(chosen);
        conv2d_forward(p, {.x = x, .weight = w, .bias = bias, .y = y});
        conv2d_backward(p, {.x = x, .weight = w, .dy = dy, .dx = dx, .dweight = dw, .dbias = db});
      }};
}

// Per-element FLOPs of one Adam step, counted from optim/adam.cpp's update loop:
//   g + l2*p (2); m = b1*m + (1-b1)*g (3); v = b2*v + (1-b2)*g*g (4);
//   p*shrink - step*(m / (sqrt(v)*c + eps)) (sqrt, mul, add, div, mul, mul, sub: 7)     = 16.
// Bytes per element: the NaN/Inf check reads g (4); the update reads p, g, m, v and writes p, m,
// v (28)                                                                                 = 32.
constexpr double kAdamFlopsPerElement = 16.0, kAdamBytesPerElement = 8.0 * kF;
// SGD with momentum (optim/sgd.cpp): d = g + wd*p (2); buf = keep*buf + take*d (3);
// p -= lr*(dir_d*d + dir_buf*buf) (5) = 10 FLOPs; bytes: check g, read p, g, buf, write p, buf
// = 6 floats. Without momentum: p -= lr*(g + wd*p) = 4 FLOPs; check g, read p, g, write p = 4.
constexpr double kSgdMomentumFlops = 10.0, kSgdMomentumBytes = 6.0 * kF;
constexpr double kSgdPlainFlops = 4.0, kSgdPlainBytes = 4.0 * kF;

// One parameter tensor [B, params] in one arena, gradients seeded once (finite, so no model is
// skipped). Keeps the arenas and the optimizer alive with the closure.
template <typename Opt, typename Hyper>
OpCase optimizer_case(int64_t B, int64_t params, const Hyper& hyper, std::string description,
                      double flops_per_element, double bytes_per_element) {
  auto buf = std::make_shared<Buffers>();
  TensorView p = buf->make({B, params}, -0.1f, 0.1f), g = buf->make({B, params}, -1e-3f, 1e-3f);
  std::vector<TensorView> views = {p};
  auto opt = std::make_shared<Opt>(ParamTable::from_views(p.data, p.numel(), views), hyper);
  const double elements = static_cast<double>(B) * params;
  return {std::move(description), flops_per_element * elements, bytes_per_element * elements,
          [=, keep_alive = buf] { opt->step(p.data, g.data); }};
}

// adam: one FusedAdam step over [B, params] (wd=weight decay; decoupled=1 makes it AdamW).
inline OpCase adam_case(int64_t B, const Options& o) {
  const int64_t params = option(o, "params", 1000000);
  AdamHyper hyper;
  hyper.weight_decay = {static_cast<float>(option_real(o, "wd", 0.0))};
  const bool decoupled = option(o, "decoupled", 0) != 0;
  auto description = fmt::format("params={}/model{}", params, decoupled ? " AdamW" : "");
  if (decoupled)
    return optimizer_case<FusedAdamW>(B, params, hyper, description, kAdamFlopsPerElement,
                                      kAdamBytesPerElement);
  return optimizer_case<FusedAdam>(B, params, hyper, description, kAdamFlopsPerElement,
                                   kAdamBytesPerElement);
}

// sgd: one FusedSgd step over [B, params]; momentum=0.9 by default, momentum=0 is plain SGD.
inline OpCase sgd_case(int64_t B, const Options& o) {
  const int64_t params = option(o, "params", 1000000);
  const float momentum = static_cast<float>(option_real(o, "momentum", 0.9));
  SgdHyper hyper;
  hyper.momentum = {momentum};
  const bool with_momentum = momentum > 0.0f;
  return optimizer_case<FusedSgd>(B, params, hyper,
                                  fmt::format("params={}/model momentum={}", params, momentum),
                                  with_momentum ? kSgdMomentumFlops : kSgdPlainFlops,
                                  with_momentum ? kSgdMomentumBytes : kSgdPlainBytes);
}

// batchnorm2d and batchnorm1d (training, affine): forward_flops() (5 per element) + backward,
// which per element reduces dy and dy*xhat (4) and forms dx = (dy - mean(dy) - xhat*mean(dy*xhat))
// * gamma*rstd (5) = 9. Bytes: forward reads x for the statistics and again to write y (3
// floats), backward reads x and dy for the sums and again to write dx (5 floats). act=relu|relu6|
// leaky_relu fuses that activation (same counts: it adds no pass over memory).
inline ActivationParams activation_of_kind(const std::string& kind);
template <typename Params, typename ForwardArgs, typename BackwardArgs>
OpCase batchnorm_case(Params p, const Options& o, const std::string& shape,
                      void (*forward)(const Params&, const ForwardArgs&),
                      void (*backward)(const Params&, const BackwardArgs&)) {
  if (const std::string act = get_option(o, "act", "none"); act != "none")
    p.activation = activation_of_kind(act);
  p.training = option(o, "training", 1) != 0;
  auto buf = std::make_shared<Buffers>();
  TensorView x = buf->make(p.x_shape()), y = buf->make(p.y_shape());
  TensorView dy = buf->make(p.y_shape()), dx = buf->make(p.x_shape());
  TensorView gamma = buf->make(p.param_shape()), beta = buf->make(p.param_shape());
  TensorView rmean = buf->make(p.param_shape()), rvar = buf->make(p.param_shape(), 0.5f, 1.5f);
  TensorView dgamma = buf->make(p.param_shape()), dbeta = buf->make(p.param_shape());
  const decltype(ForwardArgs::saved) saved{buf->make(p.param_shape()), buf->make(p.param_shape())};
  const double elements = static_cast<double>(p.x_shape().numel());
  return {
      fmt::format("{}{}{}", shape, p.training ? "" : " eval",
                  p.activation ? fmt::format(" + {}", activation_name(p.activation->kind)) : ""),
      p.forward_flops() + 9.0 * elements, (p.training ? 8.0 : 5.0) * kF * elements,
      [=, keep_alive = buf] {
        forward(p, {.x = x,
                    .gamma = gamma,
                    .beta = beta,
                    .running_mean = rmean,
                    .running_var = rvar,
                    .saved = saved,
                    .y = y});
        backward(p, {.x = x,
                     .gamma = gamma,
                     .beta = beta,
                     .y = y,
                     .saved = saved,
                     .dy = dy,
                     .dx = dx,
                     .dgamma = dgamma,
                     .dbeta = dbeta});
      }};
}

inline OpCase batchnorm2d_case(int64_t B, const Options& o) {
  BatchNorm2dParams p;
  p.B = B;
  p.N = option(o, "N", 64);
  p.C = option(o, "C", 32);
  p.H = option(o, "H", 14);
  p.W = option(o, "W", p.H);
  return batchnorm_case(p, o, fmt::format("N={} C={} {}x{}", p.N, p.C, p.H, p.W),
                        &batchnorm2d_forward, &batchnorm2d_backward);
}

// batchnorm1d on the rows layout [B, R, C] (PointNet's per-point layers: R = batch * points,
// e.g. R=80000 C=1024).
inline OpCase batchnorm1d_case(int64_t B, const Options& o) {
  BatchNorm1dParams p;
  p.B = B;
  p.R = option(o, "R", 4096);
  p.C = option(o, "C", 128);
  return batchnorm_case(p, o, fmt::format("R={} C={}", p.R, p.C), &batchnorm1d_forward,
                        &batchnorm1d_backward);
}

// layernorm over [B, N, F]: forward_flops() (7 per element) + backward: dx as batchnorm's (9 per
// element) and dgamma/dbeta (3). Bytes: forward reads x twice and writes y (3 floats); backward
// reads x, dy for dx and again for dgamma/dbeta (see fused_ops/cpu/layernorm.cpp) and writes dx:
// counted at the minimum, x, dy read once and dx written (3 floats).
inline OpCase layernorm_case(int64_t B, const Options& o) {
  LayerNormParams p;
  p.B = B;
  p.N = option(o, "N", 64);
  p.F = option(o, "F", 1024);
  auto buf = std::make_shared<Buffers>();
  TensorView x = buf->make(p.x_shape()), y = buf->make(p.y_shape());
  TensorView dy = buf->make(p.y_shape()), dx = buf->make(p.x_shape());
  TensorView gamma = buf->make(p.param_shape()), beta = buf->make(p.param_shape());
  TensorView dgamma = buf->make(p.param_shape()), dbeta = buf->make(p.param_shape());
  LayerNormSaved saved{buf->make(p.saved_shape()), buf->make(p.saved_shape())};
  const double elements = static_cast<double>(p.x_shape().numel());
  return {fmt::format("N={} F={}", p.N, p.F), p.forward_flops() + 12.0 * elements,
          6.0 * kF * elements, [=, keep_alive = buf] {
            layernorm_forward(p, {.x = x, .gamma = gamma, .beta = beta, .saved = saved, .y = y});
            layernorm_backward(p, {.x = x,
                                   .gamma = gamma,
                                   .saved = saved,
                                   .dy = dy,
                                   .dx = dx,
                                   .dgamma = dgamma,
                                   .dbeta = dbeta});
          }};
}

// maxpool2d: forward_flops() (one compare per window element) + backward (one add per output).
// Bytes: forward reads x, writes y and argmax; backward reads dy and argmax and writes dx.
inline OpCase maxpool2d_case(int64_t B, const Options& o) {
  Pool2dParams p;
  p.kind = PoolKind::kMax;
  p.B = B;
  p.N = option(o, "N", 64);
  p.C = option(o, "C", 32);
  p.H = option(o, "H", 28);
  p.W = option(o, "W", p.H);
  p.kernel_h = p.kernel_w = option(o, "k", 2);
  p.stride_h = p.stride_w = option(o, "stride", 0);
  p.pad_h = p.pad_w = option(o, "pad", 0);
  check_pool2d_params(p);
  auto buf = std::make_shared<Buffers>();
  TensorView x = buf->make(p.x_shape()), y = buf->make(p.y_shape());
  TensorView dy = buf->make(p.y_shape()), dx = buf->make(p.x_shape());
  Pool2dSaved saved{buf->make_index(p.argmax_shape(), 1)};
  const double in = static_cast<double>(p.x_shape().numel());
  const double out = static_cast<double>(p.y_shape().numel());
  return {fmt::format("N={} C={} {}x{} k{} s{}", p.N, p.C, p.H, p.W, p.kernel_h,
                      p.effective_stride_h()),
          p.forward_flops() + out, kF * (2.0 * in + 4.0 * out), [=, keep_alive = buf] {
            pool2d_forward(p, {.x = x, .saved = saved, .y = y});
            pool2d_backward(p, {.saved = saved, .dy = dy, .dx = dx});
          }};
}

// activation (relu is activation kind=relu) over [N, B*C, H, W]: ActivationParams' count, one
// FLOP per element forward and one backward. Bytes: forward reads x, writes y; backward reads y
// (or x) and dy, writes dx: 5 floats per element.
inline ActivationParams activation_of_kind(const std::string& kind) {
  for (ActivationKind k : {ActivationKind::kRelu, ActivationKind::kLeakyRelu, ActivationKind::kGelu,
                           ActivationKind::kTanh, ActivationKind::kSigmoid, ActivationKind::kRelu6})
    if (kind == activation_name(k)) return {.kind = k, .negative_slope = 0.2f};
  HFTA_CHECK(false,
             "kind={} is not known: use relu, leaky_relu (slope 0.2), gelu, tanh, sigmoid or relu6",
             kind);
  return {};
}

inline OpCase activation_case_of_kind(int64_t B, const Options& o, const std::string& kind) {
  const ActivationParams p = activation_of_kind(kind);
  const int64_t N = option(o, "N", 64), C = option(o, "C", 32), H = option(o, "H", 28);
  const int64_t W = option(o, "W", H);
  const Shape s{N, B * C, H, W};
  auto buf = std::make_shared<Buffers>();
  TensorView x = buf->make(s), y = buf->make(s), dy = buf->make(s), dx = buf->make(s);
  const double elements = static_cast<double>(s.numel());
  return {fmt::format("{} N={} C={} {}x{}", kind, N, C, H, W), 2.0 * p.forward_flops(s.numel()),
          5.0 * kF * elements, [=, keep_alive = buf] {
            activation_forward(p, {.x = x, .y = y});
            activation_backward(p, {.x = x, .y = y, .dy = dy, .dx = dx});
          }};
}

inline OpCase activation_case(int64_t B, const Options& o) {
  return activation_case_of_kind(B, o, get_option(o, "kind", "relu"));
}
inline OpCase relu_case(int64_t B, const Options& o) {
  return activation_case_of_kind(B, o, "relu");
}

// cross_entropy over logits [B, N, K]: forward_flops() (5 per logit) + backward (subtract the
// one-hot and scale: 2 per logit). Bytes: forward reads logits and writes probs, backward reads
// probs and writes dlogits: 4 floats per logit.
inline OpCase cross_entropy_case(int64_t B, const Options& o) {
  CrossEntropyParams p{B, option(o, "N", 64), option(o, "K", 10)};
  auto buf = std::make_shared<Buffers>();
  TensorView logits = buf->make(p.logits_shape(), -3.0f, 3.0f);
  IndexView labels = buf->make_index(p.labels_shape(), p.K);
  TensorView losses = buf->make(p.losses_shape()), probs = buf->make(p.logits_shape());
  TensorView dlosses = buf->make(p.losses_shape(), 1.0f, 1.0f);
  TensorView dlogits = buf->make(p.logits_shape());
  CrossEntropySaved saved{probs};
  const double logits_n = static_cast<double>(p.logits_shape().numel());
  return {fmt::format("N={} K={}", p.N, p.K), p.forward_flops() + 2.0 * logits_n,
          4.0 * kF * logits_n, [=, keep_alive = buf] {
            cross_entropy_forward(
                p, {.logits = logits, .labels = labels, .losses = losses, .saved = saved});
            cross_entropy_backward(
                p, {.saved = saved, .labels = labels, .dlosses = dlosses, .dlogits = dlogits});
          }};
}

using CaseFactory = OpCase (*)(int64_t, const Options&);

inline const std::map<std::string, CaseFactory>& case_table() {
  static const std::map<std::string, CaseFactory> table = {
      {"linear", linear_case},
      {"conv2d", conv2d_case},
      {"adam", adam_case},
      {"sgd", sgd_case},
      {"batchnorm1d", batchnorm1d_case},
      {"batchnorm2d", batchnorm2d_case},
      {"layernorm", layernorm_case},
      {"maxpool2d", maxpool2d_case},
      {"activation", activation_case},
      {"relu", relu_case},
      {"cross_entropy", cross_entropy_case},
  };
  return table;
}

inline std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : case_table()) names.push_back(name);
  return names;
}

inline OpCase make_case(const std::string& op, int64_t B, const Options& o) {
  auto it = case_table().find(op);
  HFTA_CHECK(it != case_table().end(), "unknown op '{}': choose one of {}", op,
             fmt::join(case_names(), ", "));
  apply_common_options(o);
  OpCase c = it->second(B, o);
  // Cases built with different knobs are timed interleaved: each run sets its own.
  c.run = [o, run = std::move(c.run)] {
    apply_common_options(o);
    run();
  };
  return c;
}

}  // namespace hfta::bench
