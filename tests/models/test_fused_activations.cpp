// Activations fused into BatchNorm (Net::finalize, models/net_finalize.cpp): a ReLU, ReLU6 or
// LeakyReLU (slope >= 0) that alone reads a BatchNorm2d's or BatchNorm1d's output runs in the
// BatchNorm's passes on the CPU. Here: which pairs fuse and which do not, and that a net with its
// activations fused computes bit for bit what the same net with every op apart computes
// (NetSpec::fuse_activations = false), losses, parameter gradients, the input gradient and the
// running statistics, over several steps in training and in eval, B in {1, 2, 3}, for a conv net
// and a PointNet-like net.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/runtime.h"
#include "core/device_memory.h"
#include "core/rng.h"
#include "models/net.h"
#include "test_util.h"

namespace hfta {
namespace {

constexpr int64_t kBatch = 5;

bool describes(const Net& n, const std::string& text) {
  return n.describe().find(text) != std::string::npos;
}

TEST(FusedActivations, WhichPairsFuse) {
  auto net = std::make_unique<Net>(NetSpec{.B = 2, .capacity = kBatch, .seed = 3});
  Net& n = *net;
  const Value images = n.input(Shape{3, 6, 6}), labels = n.index_input(Shape{});
  auto conv = [&](Value x, const std::string& name) {
    return n.conv2d(x, name, {.out_channels = 4, .kernel = 3, .pad = 1});
  };
  Value x = n.relu(n.batchnorm2d(conv(images, "c1"), "relu_bn"));
  x = n.relu6(n.batchnorm2d(conv(x, "c2"), "relu6_bn"));
  x = n.leaky_relu(n.batchnorm2d(conv(x, "c3"), "leaky_bn"), 0.2f);
  x = n.leaky_relu(n.batchnorm2d(conv(x, "c4"), "negative_leaky_bn"), -0.1f);
  x = n.tanh(n.batchnorm2d(conv(x, "c5"), "tanh_bn"));
  const Value read_twice = n.batchnorm2d(conv(x, "c6"), "read_twice_bn");
  x = n.add(n.relu(read_twice), read_twice);
  x = n.relu(conv(x, "c7"));  // after a convolution: nothing to fuse into
  n.add_loss(n.cross_entropy(n.linear(n.flatten(x), "fc", {.out_features = 3}), labels));
  n.finalize();
  EXPECT_TRUE(describes(n, "relu_bn: BatchNorm2d(4) + relu ->")) << n.describe();
  EXPECT_TRUE(describes(n, "relu6_bn: BatchNorm2d(4) + relu6"));
  EXPECT_TRUE(describes(n, "leaky_bn: BatchNorm2d(4) + leaky_relu"));
  EXPECT_TRUE(describes(n, "negative_leaky_bn: BatchNorm2d(4) ->"))
      << "a negative slope's backward reads the input";
  EXPECT_TRUE(describes(n, "tanh_bn: BatchNorm2d(4) ->"));
  EXPECT_TRUE(describes(n, "read_twice_bn: BatchNorm2d(4) ->")) << "the add reads it too";
  EXPECT_TRUE(describes(n, "c7: Conv2d(4, 4, kernel 3, stride 1, pad 1) -> [4, 6, 6]\n  relu ->"));

  auto apart = std::make_unique<Net>(
      NetSpec{.B = 1, .capacity = kBatch, .seed = 3, .fuse_activations = false});
  const Value b = apart->relu(apart->batchnorm2d(
      apart->conv2d(apart->input(Shape{3, 4, 4}), "c", {.out_channels = 2}), "bn"));
  apart->add_loss(apart->cross_entropy(apart->linear(apart->flatten(b), "fc", {.out_features = 2}),
                                       apart->index_input(Shape{})));
  apart->finalize();
  EXPECT_TRUE(describes(*apart, "bn: BatchNorm2d(2) ->")) << apart->describe();
}

struct Trace {
  std::vector<float> losses, param_grads, input_grad, buffers;
};

// Four steps of a finalized net (an eval step third), plain SGD by hand: `feed` sets the inputs of
// each step; `input` (when valid) is an input whose gradient the trace records. BatchNorm's
// weights 4 and biases 1 first spread its outputs over [-7, 9] (about), past both of ReLU6's
// clamps.
Trace run_steps(Net& n, uint64_t seed, const std::function<void(RngStream&)>& feed,
                Value input = {}) {
  for (const Param& p : n.params()) {
    if (p.name.starts_with("bn") && p.name.ends_with(".weight")) fill_view(p.value, 4.0f);
    if (p.name.starts_with("bn") && p.name.ends_with(".bias")) fill_view(p.value, 1.0f);
  }
  RngStream rng(seed, 11);
  Trace run;
  for (int step = 0; step < 4; ++step) {
    const bool training = step != 2;
    feed(rng);
    n.forward(training);
    const TensorView loss = n.value(n.losses()[0]);
    run.losses.insert(run.losses.end(), loss.data, loss.data + loss.numel());
    if (!training) continue;
    n.zero_grad_and_backward();
    if (input.valid()) {
      const TensorView dx = n.grad(input);
      run.input_grad.insert(run.input_grad.end(), dx.data, dx.data + dx.numel());
    }
    for (const Param& p : n.params()) {
      run.param_grads.insert(run.param_grads.end(), p.grad.data, p.grad.data + p.grad.numel());
      for (int64_t i = 0; i < p.value.numel(); ++i) p.value.data[i] -= 0.05f * p.grad.data[i];
    }
  }
  for (const ModelBuffer& b : n.buffers())
    run.buffers.insert(run.buffers.end(), b.value.data, b.value.data + b.value.numel());
  return run;
}

// A small conv net with every fusable pair (on 5x5 and 1x1 planes, the kernel's runtime and
// channel loops) and a residual add, run fused and apart from the same seed and inputs.
Trace train(bool fuse, int64_t B, uint64_t seed) {
  Net n(NetSpec{.B = B, .capacity = kBatch, .seed = seed, .fuse_activations = fuse});
  const Value images = n.model_input(Shape{3, 5, 5}, /*needs_grad=*/true);
  const Value labels = n.index_input(Shape{});
  auto conv = [&](Value x, const std::string& name, int64_t out, int64_t kernel, int64_t stride) {
    return n.conv2d(x, name,
                    {.out_channels = out, .kernel = kernel, .stride = stride, .pad = kernel / 2});
  };
  Value x = n.relu(n.batchnorm2d(conv(images, "c1", 6, 3, 1), "bn1"));
  Value h = n.relu6(n.batchnorm2d(conv(x, "c2", 6, 3, 1), "bn2"));
  x = n.add(h, x);
  x = n.leaky_relu(n.batchnorm2d(conv(x, "c3", 8, 5, 5), "bn3"), 0.2f);  // 1x1 planes
  x = n.relu6(n.batchnorm2d(conv(x, "c4", 7, 1, 1), "bn4"));
  n.add_loss(n.cross_entropy(n.linear(n.flatten(x), "fc", {.out_features = 4}), labels));
  n.finalize();
  EXPECT_EQ(describes(n, "bn3: BatchNorm2d(8) + leaky_relu"), fuse);
  std::vector<float> image_values(static_cast<size_t>(kBatch * B * 3 * 5 * 5));
  std::vector<int32_t> label_values(kBatch);
  return run_steps(
      n, seed,
      [&](RngStream& rng) {
        for (float& v : image_values) v = rng.uniform(-2.0f, 2.0f);
        for (int32_t& l : label_values) l = static_cast<int32_t>(rng.below(4));
        n.set_input(images, TensorView(image_values.data(), Shape{kBatch, B * 3, 5, 5}));
        n.set_input(labels, IndexView(label_values.data(), Shape{kBatch}));
      },
      images);
}

// PointNet's shape of layer: per-point Conv1d, BatchNorm1d and ReLU over [L, C] points.
Trace train_points(bool fuse, int64_t B, uint64_t seed) {
  constexpr int64_t kPoints = 7;
  Net n(NetSpec{.B = B, .capacity = kBatch, .seed = seed, .fuse_activations = fuse});
  const Value points = n.input(Shape{kPoints, 3});
  const Value labels = n.index_input(Shape{});
  Value x = n.relu(n.batchnorm1d(n.conv1d(points, "conv1", {.out_features = 16}), "bn1"));
  x = n.relu6(n.batchnorm1d(n.conv1d(x, "conv2", {.out_features = 24}), "bn2"));
  x = n.max_over_points(x);
  x = n.leaky_relu(n.batchnorm1d(n.linear(x, "fc1", {.out_features = 8}), "bn3"), 0.2f);
  n.add_loss(n.cross_entropy(n.linear(x, "fc2", {.out_features = 4}), labels));
  n.finalize();
  EXPECT_EQ(describes(n, "bn1: BatchNorm1d(16) + relu"), fuse) << n.describe();
  EXPECT_EQ(describes(n, "bn3: BatchNorm1d(8) + leaky_relu"), fuse) << n.describe();
  std::vector<float> point_values(static_cast<size_t>(kBatch * kPoints * 3));
  std::vector<int32_t> label_values(kBatch);
  return run_steps(n, seed, [&](RngStream& rng) {
    for (float& v : point_values) v = rng.uniform(-2.0f, 2.0f);
    for (int32_t& l : label_values) l = static_cast<int32_t>(rng.below(4));
    n.set_input(points, TensorView(point_values.data(), Shape{kBatch, kPoints, 3}));
    n.set_input(labels, IndexView(label_values.data(), Shape{kBatch}));
  });
}

TEST(FusedActivations, FusedNetEqualsTheNetWithEveryOpApartBitForBit) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  for (int64_t B : {1, 2, 3})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("B={} threads={}", B, threads));
      cpu::set_num_threads(threads);
      const Trace fused = train(true, B, seed), apart = train(false, B, seed);
      test::expect_same_bits(fused.losses, apart.losses, "losses");
      test::expect_same_bits(fused.param_grads, apart.param_grads, "parameter gradients");
      test::expect_same_bits(fused.input_grad, apart.input_grad, "input gradient");
      test::expect_same_bits(fused.buffers, apart.buffers, "running statistics");
      EXPECT_EQ(fused.losses.size(), static_cast<size_t>(4 * B));
      const Trace points = train_points(true, B, seed), points_apart = train_points(false, B, seed);
      test::expect_same_bits(points.losses, points_apart.losses, "BatchNorm1d net: losses");
      test::expect_same_bits(points.param_grads, points_apart.param_grads,
                             "BatchNorm1d net: parameter gradients");
      test::expect_same_bits(points.buffers, points_apart.buffers,
                             "BatchNorm1d net: running statistics");
    }
}

}  // namespace
}  // namespace hfta
