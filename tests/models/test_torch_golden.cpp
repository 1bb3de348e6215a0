// Each model against PyTorch: from hfta's own initial weights, 3 training steps (train mode:
// BatchNorm batch statistics; dropout off) on fixed batches of 32 and the eval-mode loss after
// them give PyTorch's losses within 1e-4 relative, with Adam and Adadelta at the learning rates
// in the golden file (small ones for the deep nets, whose trajectories are chaotic at large
// steps: see benchmarks/torch_golden.py). PyTorch's numbers are in golden/torch_losses.txt,
// written by benchmarks/torch_golden.py (which loads `hfta export --init`'s weights into
// torchvision's modules), so this test needs no PyTorch. Model 0 of a fused array of 2 must give
// the same losses as the model alone, hence PyTorch's too.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "models/gan.h"
#include "models/language_model.h"
#include "models/model.h"
#include "models/torch_golden.h"
#include "optim/adadelta.h"
#include "optim/adam.h"
#include "sanitizer.h"

namespace hfta {
namespace {

using test::fixed_batch;
using test::kBatch;
using test::kClasses;
using test::kRtol;
using test::kSeed;
using test::kSteps;
using test::make_optimizer;
using test::read_golden;

class TorchGolden : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(TorchGolden, LossesMatchPyTorch) {
  const auto& [name, optimizer] = GetParam();
  const auto golden = read_golden();
  // PointNet on clouds of 64 points (benchmarks/torch_golden.py), the others on their defaults.
  const Shape sample =
      name.starts_with("pointnet") ? Shape{64, 3} : model_info(name).default_sample_shape;
  for (int64_t B : {1, 2}) {
    SCOPED_TRACE(fmt::format("{} {} B={} (model 0 compared)", name, optimizer, B));
    auto model = make_model(name, {.B = B,
                                   .batch_size = kBatch,
                                   .seed = kSeed,
                                   .sample_shape = sample,
                                   .num_classes = kClasses,
                                   .dropout = 0.0f});
    auto lr = golden.lr.find({name, optimizer});
    ASSERT_NE(lr, golden.lr.end()) << "no golden run: run benchmarks/torch_golden.py";
    auto opt = make_optimizer(optimizer, *model, lr->second);
    std::vector<float> x;
    std::vector<int32_t> y;
    auto expect_loss = [&](const std::string& phase, int step) {
      auto it = golden.loss.find({name, optimizer, phase, step});
      ASSERT_NE(it, golden.loss.end()) << "no golden " << phase << " loss for step " << step
                                       << ": run benchmarks/torch_golden.py";
      const double ours = model->losses()[0];
      EXPECT_NEAR(ours, it->second, kRtol * std::fabs(it->second))
          << phase << " step " << step << ": hfta " << ours << " PyTorch " << it->second;
    };
    for (int step = 0; step < kSteps; ++step) {
      fixed_batch(step, sample, x, y);
      Shape shape{kBatch};
      for (int64_t d : sample) shape.push_back(d);
      model->forward(TensorView(x.data(), shape), IndexView(y.data(), Shape{kBatch}), true);
      expect_loss("train", step + 1);
      model->backward();
      opt->step(model->param_arena(), model->grad_arena());
    }
    fixed_batch(kSteps, sample, x, y);
    Shape shape{kBatch};
    for (int64_t d : sample) shape.push_back(d);
    model->forward(TensorView(x.data(), shape), IndexView(y.data(), Shape{kBatch}), false);
    expect_loss("eval", kSteps + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TorchGolden,
                         ::testing::Combine(::testing::Values("mlp", "lenet", "resnet18",
                                                              "mobilenetv2", "mobilenetv3_small",
                                                              "mobilenetv3_large", "pointnet_cls",
                                                              "pointnet_cls_ft"),
                                            ::testing::Values("adam", "adadelta")));

// PointNet part segmentation (fxia22's PointNetDenseCls, 10 parts, clouds of 64 points): the
// fixed clouds with per-point labels (7n + 3 step + 5j) mod 10 (torch_models.fixed_point_labels),
// the loss the mean cross-entropy over all points; the feature transform's regularizer trains.
class TorchGoldenSeg : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(TorchGoldenSeg, LossesMatchPyTorch) {
  const auto& [name, optimizer] = GetParam();
  const auto golden = read_golden();
  constexpr int64_t kPoints = 64;
  const Shape sample{kPoints, 3};
  for (int64_t B : {1, 2}) {
    SCOPED_TRACE(fmt::format("{} {} B={} (model 0 compared)", name, optimizer, B));
    auto model = make_model(name, {.B = B,
                                   .batch_size = kBatch,
                                   .seed = kSeed,
                                   .sample_shape = sample,
                                   .num_classes = kClasses});
    ASSERT_EQ(model->labels_per_sample(), kPoints);
    auto lr = golden.lr.find({name, optimizer});
    ASSERT_NE(lr, golden.lr.end()) << "no golden run: run benchmarks/torch_golden.py";
    auto opt = make_optimizer(optimizer, *model, lr->second);
    std::vector<float> x;
    std::vector<int32_t> ignored, y(static_cast<size_t>(kBatch * kPoints));
    auto batch = [&](int step) {
      fixed_batch(step, sample, x, ignored);
      for (int64_t n = 0; n < kBatch; ++n)
        for (int64_t j = 0; j < kPoints; ++j)
          y[static_cast<size_t>(n * kPoints + j)] =
              static_cast<int32_t>((7 * n + 3 * step + 5 * j) % kClasses);
    };
    auto expect_loss = [&](const std::string& phase, int step) {
      auto it = golden.loss.find({name, optimizer, phase, step});
      ASSERT_NE(it, golden.loss.end()) << "no golden " << phase << " loss for step " << step
                                       << ": run benchmarks/torch_golden.py";
      const double ours = model->losses()[0];
      EXPECT_NEAR(ours, it->second, kRtol * std::fabs(it->second))
          << phase << " step " << step << ": hfta " << ours << " PyTorch " << it->second;
    };
    const Shape shape{kBatch, kPoints, 3}, labels{kBatch, kPoints};
    for (int step = 0; step < kSteps; ++step) {
      batch(step);
      model->forward(TensorView(x.data(), shape), IndexView(y.data(), labels), true);
      expect_loss("train", step + 1);
      model->backward();
      opt->step(model->param_arena(), model->grad_arena());
    }
    batch(kSteps);
    model->forward(TensorView(x.data(), shape), IndexView(y.data(), labels), false);
    expect_loss("eval", kSteps + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TorchGoldenSeg,
                         ::testing::Combine(::testing::Values("pointnet_seg", "pointnet_seg_ft"),
                                            ::testing::Values("adam", "adadelta")));

// The transformer language model (benchmarks/torch_golden.py's LM sizes): word_language_model's
// TransformerModel from the same initial weights, dropout 0, windows of torch_models.fixed_tokens.
class TorchGoldenLm : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchGoldenLm, LossesMatchPyTorch) {
  const std::string optimizer = GetParam();
  constexpr int64_t kVocab = 50, kStreams = 4, kBptt = 8;
  const auto golden = read_golden();
  auto lr = golden.lr.find({"transformer", optimizer});
  ASSERT_NE(lr, golden.lr.end()) << "no golden run: run benchmarks/torch_golden.py";
  for (int64_t B : {1, 2}) {
    SCOPED_TRACE(fmt::format("transformer {} B={} (model 0 compared)", optimizer, B));
    auto model = make_language_model("transformer",
                                     {.B = B,
                                      .streams = kStreams,
                                      .seed = kSeed,
                                      .config = {.vocab = kVocab, .bptt = kBptt, .dropout = 0.0f}});
    std::vector<TensorView> values;
    for (const Param& p : model->params()) values.push_back(p.value);
    ParamTable table = ParamTable::from_arena(model->net().param_arena(), values);
    std::unique_ptr<Optimizer> opt;
    if (optimizer == "adam")
      opt = std::make_unique<FusedAdam>(std::move(table), AdamHyper{.lr = {lr->second}});
    else
      opt = std::make_unique<FusedAdadelta>(std::move(table), AdadeltaHyper{.lr = {lr->second}});
    std::vector<int32_t> x(kStreams * kBptt), y(kStreams * kBptt);
    auto window = [&](int step) {  // torch_models.fixed_tokens, as [S, T]
      for (int64_t s = 0; s < kStreams; ++s)
        for (int64_t t = 0; t < kBptt; ++t) {
          x[static_cast<size_t>(s * kBptt + t)] =
              static_cast<int32_t>((13 * s + 7 * t + 3 * step + s * t) % kVocab);
          y[static_cast<size_t>(s * kBptt + t)] =
              static_cast<int32_t>((13 * s + 7 * (t + 1) + 3 * step + s * (t + 1)) % kVocab);
        }
    };
    auto expect_loss = [&](const std::string& phase, int step) {
      auto it = golden.loss.find({"transformer", optimizer, phase, step});
      ASSERT_NE(it, golden.loss.end()) << "no golden " << phase << " loss for step " << step;
      const double ours = model->losses()[0];
      EXPECT_NEAR(ours, it->second, kRtol * std::fabs(it->second))
          << phase << " step " << step << ": hfta " << ours << " PyTorch " << it->second;
    };
    const Shape shape{kStreams, kBptt};
    for (int step = 0; step < kSteps; ++step) {
      window(step);
      model->forward(IndexView(x.data(), shape), IndexView(y.data(), shape), true);
      expect_loss("train", step + 1);
      model->backward();
      opt->step(model->net().param_arena(), model->net().grad_arena());
    }
    window(kSteps);
    model->forward(IndexView(x.data(), shape), IndexView(y.data(), shape), false);
    expect_loss("eval", kSteps + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TorchGoldenLm, ::testing::Values("adam", "adadelta"));

// DCGAN (64x64, 1 channel, batch 8): PyTorch's example step from hfta's initial G and D on the
// fixed batches, with noise from the same formula at step 10 + step; loss_d and loss_g of 3 steps.
// Model 0 of a fused pair gives them too.
TEST(TorchGoldenDcgan, LossesMatchPyTorch) {
  const auto golden = read_golden();
  constexpr int64_t kGanBatch = 8;
  const DcganArch arch{.nc = 1, .image = 64};
  auto batch = [](int step, const Shape& sample, std::vector<float>& x) {
    const int64_t per = sample.numel();
    x.resize(static_cast<size_t>(kGanBatch * per));
    for (int64_t n = 0; n < kGanBatch; ++n)
      for (int64_t i = 0; i < per; ++i)
        x[static_cast<size_t>(n * per + i)] = static_cast<float>(
            std::sin(0.05 * static_cast<double>(i + 1) * static_cast<double>(n + 1) + 0.3 * step));
  };
  auto lr = golden.lr.find({"dcgan", "adam"});
  ASSERT_NE(lr, golden.lr.end()) << "no golden dcgan run: run benchmarks/torch_golden.py";
  for (int64_t B : {1, 2}) {
    SCOPED_TRACE(fmt::format("dcgan B={} (model 0 compared)", B));
    GanSpec spec{.arch = arch, .B = B, .batch = kGanBatch, .seed = kSeed};
    spec.g_adam = AdamHyper{.lr = {lr->second}, .beta1 = {0.5f}};
    spec.d_adam = spec.g_adam;
    GanArray gan(spec);
    std::vector<float> real, z1, z;
    for (int step = 0; step < kSteps; ++step) {
      batch(step, Shape{arch.nc, arch.image, arch.image}, real);
      batch(10 + step, Shape{arch.nz, 1, 1}, z1);
      // Every model of the array gets the same noise: [n, B*nz, 1, 1].
      z.resize(z1.size() * static_cast<size_t>(B));
      for (int64_t n = 0; n < kGanBatch; ++n)
        for (int64_t b = 0; b < B; ++b)
          std::copy_n(z1.data() + n * arch.nz, arch.nz, z.data() + (n * B + b) * arch.nz);
      const TensorView noise(z.data(), Shape{kGanBatch, B * arch.nz, 1, 1});
      const GanStepStats s = gan.step(
          TensorView(real.data(), Shape{kGanBatch, arch.nc, arch.image, arch.image}), &noise);
      for (const auto& [phase, ours] :
           {std::pair{"loss_d", s.loss_d[0]}, std::pair{"loss_g", s.loss_g[0]}}) {
        auto it = golden.loss.find({"dcgan", "adam", phase, step + 1});
        ASSERT_NE(it, golden.loss.end()) << "no golden dcgan " << phase << " for step " << step + 1;
        EXPECT_NEAR(ours, it->second, kRtol * std::fabs(it->second))
            << phase << " step " << step + 1 << ": hfta " << ours << " PyTorch " << it->second;
      }
    }
  }
}

}  // namespace
}  // namespace hfta
