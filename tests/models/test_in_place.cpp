// In-place activations (Net::finalize, docs/design.md "In-place activations"): an activation
// whose backward reads only its output (ReLU, ReLU6, tanh, ...) writes over its input's buffer when
// the activation is the input's only reader and the input's producer never reads its own output (a
// convolution, BatchNorm, an add, a linear); in every other case it gets a buffer of its own. That
// the models still train as before is checked by every model test (fused against serial, PyTorch's
// golden losses); here, which values share a buffer, and that the sharing saves memory.
#include <gtest/gtest.h>

#include <memory>

#include "models/net.h"

namespace hfta {
namespace {

constexpr int64_t kBatch = 4;

std::unique_ptr<Net> small_net() {
  return std::make_unique<Net>(NetSpec{.B = 2, .capacity = kBatch, .seed = 5});
}

void finish(Net& n, Value x, Value labels) {
  n.add_loss(n.cross_entropy(n.linear(n.flatten(x), "fc", {.out_features = 3}), labels));
  n.finalize();
}

bool shares_buffer(const Net& n, Value a, Value b) { return n.value(a).data == n.value(b).data; }

TEST(InPlace, ActivationsAfterBatchNormConvolutionAndAddShareTheirInputsBuffer) {
  std::unique_ptr<Net> net = small_net();
  Net& n = *net;
  const Value images = n.input(Shape{3, 6, 6}), labels = n.index_input(Shape{});
  const Value c1 = n.conv2d(images, "c1", {.out_channels = 4, .kernel = 3, .pad = 1});
  const Value b1 = n.batchnorm2d(c1, "bn1");
  const Value r1 = n.relu(b1);
  const Value c2 = n.conv2d(r1, "c2", {.out_channels = 4, .kernel = 3, .pad = 1});
  const Value r2 = n.relu6(c2);
  const Value sum = n.add(r2, r1);
  const Value r3 = n.relu(sum);
  finish(n, r3, labels);
  EXPECT_TRUE(shares_buffer(n, b1, r1)) << "ReLU after BatchNorm";
  EXPECT_TRUE(shares_buffer(n, c2, r2)) << "ReLU6 after a convolution";
  EXPECT_TRUE(shares_buffer(n, sum, r3)) << "ReLU after an add";
  EXPECT_FALSE(shares_buffer(n, c1, b1)) << "BatchNorm is not in place";
  EXPECT_FALSE(shares_buffer(n, r1, r2));
}

TEST(InPlace, NotWhenTheInputIsReadElsewhereOrTheActivationNeedsIt) {
  std::unique_ptr<Net> net = small_net();
  Net& n = *net;
  const Value images = n.input(Shape{3, 6, 6}), labels = n.index_input(Shape{});
  const Value c1 = n.conv2d(images, "c1", {.out_channels = 4, .kernel = 3, .pad = 1});
  const Value r1 = n.relu(c1);  // c1 is read by the add too
  const Value sum = n.add(r1, c1);
  const Value t = n.tanh(sum);  // tanh's backward reads its output: ReLU may not overwrite it
  const Value r2 = n.relu(t);
  const Value c2 = n.conv2d(r2, "c2", {.out_channels = 4, .kernel = 1});
  const Value g = n.gelu(c2);  // GELU's backward reads its input
  finish(n, g, labels);
  EXPECT_FALSE(shares_buffer(n, c1, r1)) << "an input with two readers";
  EXPECT_TRUE(shares_buffer(n, sum, t)) << "tanh's backward reads only its output too";
  EXPECT_FALSE(shares_buffer(n, t, r2)) << "ReLU after tanh, whose backward reads its output";
  EXPECT_FALSE(shares_buffer(n, c2, g)) << "GELU reads its input in backward";
}

// The same network with its ReLUs in place takes less activation memory than with each ReLU's
// input read twice (which forbids the sharing): one buffer of the activation's size per ReLU.
TEST(InPlace, SharingShrinksTheActivationArena) {
  auto build = [](bool second_reader) {
    auto net = small_net();
    Net& n = *net;
    const Value images = n.input(Shape{3, 6, 6}), labels = n.index_input(Shape{});
    const Value b1 =
        n.batchnorm2d(n.conv2d(images, "c1", {.out_channels = 8, .kernel = 3, .pad = 1}), "bn1");
    Value x = n.relu(b1);
    if (second_reader) x = n.add(x, b1);
    finish(n, x, labels);
    return net;
  };
  const size_t shared = build(false)->arena_bytes(), apart = build(true)->arena_bytes();
  // Apart, the ReLU's output and the add's need two more buffers of [4, 2*8, 6, 6] floats.
  EXPECT_LT(shared, apart);
  EXPECT_GE(apart - shared, size_t{kBatch * 2 * 8 * 6 * 6 * sizeof(float)});
}

}  // namespace
}  // namespace hfta
