// End-to-end equivalence of the model arrays: replica b of a B-model array starts from, steps
// through, and ends at exactly what model b trained alone does.
//
// Tolerance (fp32): the fused kernels may group a model's sums differently from the single-model
// ones (a grouped convolution versus a plain one), so results agree to rounding, not bitwise.
// Losses agree to 2e-5 relative. Parameters: Adam divides the gradient by its own running
// magnitude, so where a gradient is at rounding level (~1e-9) rounding can move that parameter
// by a visible fraction of lr. So all but 1e-5 of the parameters must agree to 1e-5 absolute,
// and every parameter to 0.05 * lr (a model that diverged would differ by ~lr per step).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/runtime.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/parallel.h"
#include "datasets/loader.h"
#include "datasets/synthetic.h"
#include "models/model.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "test_util.h"

namespace hfta {
namespace {

constexpr float kLossRtol = 2e-5f;
struct TrainedArray {
  std::vector<std::vector<float>> losses;  // [step][model]
  std::vector<std::vector<float>> params;  // [model][params_per_model]
};

ParamTable table_of(const Model& model) {
  std::vector<TensorView> values;
  for (const Param& p : model.params()) values.push_back(p.value);
  return ParamTable::from_arena(model.param_arena(), values);
}

// Trains models `ids` as one array for `steps` Adam steps on a shared synthetic loader.
TrainedArray train(const std::string& name, const std::vector<int64_t>& ids,
                   const std::vector<float>& lr, int steps, uint64_t seed, int64_t samples = 64) {
  const int64_t B = static_cast<int64_t>(ids.size());
  auto model = make_model(name, {.B = B, .batch_size = 16, .seed = seed, .model_ids = ids});
  std::vector<float> my_lr;
  for (int64_t id : ids) my_lr.push_back(lr[static_cast<size_t>(id)]);
  FusedAdam optimizer(table_of(*model), AdamHyper{.lr = my_lr, .weight_decay = {1e-4f}});
  Dataset data = make_synthetic(model->sample_shape(), 10, samples, seed);
  Loader loader(data, {.batch_size = 16, .seed = seed});
  Batch batch = loader.make_batch();
  TrainedArray run;
  for (int s = 0; s < steps; ++s) {
    if (!loader.next(batch)) loader.next(batch);
    model->forward(batch.images(), batch.labels(), true);
    run.losses.push_back(model->losses());
    model->backward();
    optimizer.step(model->param_arena(), model->grad_arena());
  }
  for (int64_t b = 0; b < B; ++b) run.params.push_back(model->extract(b));
  return run;
}

class ModelArray : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelArray, InitialWeightsOfReplicaBEqualModelBAlone) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  auto array = make_model(GetParam(), {.B = 3, .batch_size = 4, .seed = seed, .model_ids = {}});
  for (int64_t b = 0; b < 3; ++b) {
    auto alone = make_model(GetParam(), {.B = 1, .batch_size = 4, .seed = seed, .model_ids = {b}});
    EXPECT_EQ(array->extract(b), alone->extract(0)) << "model " << b;
  }
  EXPECT_NE(array->extract(0), array->extract(1)) << "replicas must start from different weights";
}

// Whole trajectories: 4 Adam steps of an array of 4 against 4 single runs. Not for MobileNetV2,
// whose trajectories at these settings are chaotic in fp32 whatever computes them: the bias of
// each block's projection BatchNorm has a gradient at rounding level (~1e-7; the next
// BatchNorm removes any per-channel shift), which Adam's first step turns into a full +-lr step
// in a direction set by rounding, and its 1x1 BatchNorms over 16 values amplify such
// differences (in PyTorch alone, weights perturbed by 1e-6 change the third loss by 1e-2 at
// batch 16: docs/benchmarks.md). StepLockedFusedEqualsSingle checks it step by step instead.
// On one thread: the array and the single runs then sum in the same order on every CPU. With
// two, oneDNN's AVX2 convolutions split a lone model's weight-gradient sum over the threads but
// not that of a model with a thread of its own, and ResNet-18's trajectories part as
// MobileNetV2's do (StepLockedFusedEqualsSingle covers the threaded kernels).
TEST_P(ModelArray, FusedTrainingOfFourEqualsFourSingleRuns) {
  if (GetParam() == "mobilenetv2") GTEST_SKIP() << "chaotic trajectories: see the comment above";
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  struct OneThread {
    int before = num_threads();
    OneThread() { cpu::set_num_threads(1); }
    ~OneThread() { cpu::set_num_threads(before); }
  } one_thread;
  const std::vector<float> lr = {1e-3f, 3e-3f, 1e-4f, 4e-3f};
  const int steps = 4;
  TrainedArray fused = train(GetParam(), {0, 1, 2, 3}, lr, steps, seed);
  for (int64_t b = 0; b < 4; ++b) {
    TrainedArray alone = train(GetParam(), {b}, lr, steps, seed);
    for (int s = 0; s < steps; ++s)
      EXPECT_NEAR(fused.losses[s][b], alone.losses[s][0], kLossRtol * alone.losses[s][0])
          << "model " << b << " step " << s;
    test::expect_adam_parameters_agree(fused.params[b], alone.params[0], lr[static_cast<size_t>(b)],
                                       "final parameters of model " + std::to_string(b));
  }
  // Different learning rates must give different models (the comparison above is not vacuous).
  EXPECT_NE(fused.params[0], fused.params[1]);
}

// Each step from the same weights: model b of an array of 3 and model b alone see the same
// batch; their losses, every parameter gradient and the SGD-with-momentum update agree to
// rounding (gradients within 1e-4 of the tensor's largest gradient, plus 1e-6 of the model's
// largest: a gradient that cancels to almost nothing, such as the shift of a BatchNorm whose
// output another BatchNorm normalizes, is a sum of terms the size of its neighbours' gradients
// and carries their rounding, which on MobileNetV2 exceeds a fixed 1e-6 at some seeds). Then the
// array's model b continues from the single model's weights, so rounding cannot compound into
// chaos and every step is checked on its own.
TEST_P(ModelArray, StepLockedFusedEqualsSingle) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const int64_t B = 3, batch = 16;
  const std::vector<float> lr = {0.01f, 0.03f, 0.002f};
  auto array = make_model(GetParam(), {.B = B, .batch_size = batch, .seed = seed});
  FusedSgd array_sgd(table_of(*array), SgdHyper{.lr = lr, .momentum = {0.9f}});
  std::vector<std::unique_ptr<Model>> alone;
  std::vector<std::unique_ptr<FusedSgd>> alone_sgd;
  for (int64_t b = 0; b < B; ++b) {
    alone.push_back(
        make_model(GetParam(), {.B = 1, .batch_size = batch, .seed = seed, .model_ids = {b}}));
    alone_sgd.push_back(std::make_unique<FusedSgd>(
        table_of(*alone.back()), SgdHyper{.lr = {lr[static_cast<size_t>(b)]}, .momentum = {0.9f}}));
  }
  Dataset data = make_synthetic(array->sample_shape(), 10, 64, seed);
  Loader loader(data, {.batch_size = batch, .seed = seed});
  Batch batch_data = loader.make_batch();
  for (int step = 0; step < 3; ++step) {
    loader.next(batch_data);
    array->forward(batch_data.images(), batch_data.labels(), true);
    array->backward();
    for (int64_t b = 0; b < B; ++b) {
      SCOPED_TRACE(fmt::format("model {} step {}", b, step));
      Model& one = *alone[static_cast<size_t>(b)];
      one.forward(batch_data.images(), batch_data.labels(), true);
      one.backward();
      EXPECT_NEAR(array->losses()[b], one.losses()[0], kLossRtol * one.losses()[0]);
      double model_largest = 0;
      for (const auto& param : one.params())
        for (int64_t k = 0; k < param.grad.numel(); ++k)
          model_largest = std::max(model_largest, std::fabs(static_cast<double>(param.grad[k])));
      const double floor = 1e-6 * std::max(1.0, model_largest);
      for (size_t i = 0; i < one.params().size(); ++i) {
        const TensorView fused = array->params()[i].grad.replica(b), single = one.params()[i].grad;
        double largest = 0, worst = 0;
        for (int64_t k = 0; k < single.numel(); ++k) {
          largest = std::max(largest, std::fabs(static_cast<double>(single[k])));
          worst = std::max(worst, std::fabs(static_cast<double>(fused[k]) - single[k]));
        }
        EXPECT_LE(worst, 1e-4 * largest + floor) << one.params()[i].name << " gradient";
      }
    }
    array_sgd.step(array->param_arena(), array->grad_arena());
    for (int64_t b = 0; b < B; ++b) {
      Model& one = *alone[static_cast<size_t>(b)];
      alone_sgd[static_cast<size_t>(b)]->step(one.param_arena(), one.grad_arena());
      // One SGD step from the same weights: rounding stays rounding (no Adam normalization).
      const std::vector<float> single = one.extract(0);
      test::expect_parameters_close(
          array->extract(b), single, 1e-5 * static_cast<double>(single.size()),
          0.05 * lr[static_cast<size_t>(b)], fmt::format("model {} after step {}", b, step));
      array->insert(b, one.extract(0));
    }
  }
}

// Net::zero_grad_and_backward (what Model::backward runs) zeroes each node's parameter gradients
// as its backward comes, or lets a convolution or linear layer write them: it must leave every
// gradient as zero_grad() then backward() do, whatever the gradients held before (garbage here),
// under the fused plan and under a threads plan (nets bound to slices of the array's state).
TEST_P(ModelArray, GradientsZeroedNodeByNodeEqualZeroedAtOnce) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const int64_t B = 3, batch = 8;
  auto model = make_model(GetParam(), {.B = B, .batch_size = batch, .seed = seed});
  Dataset data = make_synthetic(model->sample_shape(), 10, batch, seed);
  Loader loader(data, {.batch_size = batch, .seed = seed});
  Batch batch_data = loader.make_batch();
  loader.next(batch_data);
  model->forward(batch_data.images(), batch_data.labels(), true);
  Net& net = model->net();
  net.zero_grad();
  net.backward();
  std::vector<std::vector<float>> want;
  for (const Param& p : net.params()) want.emplace_back(p.grad.data, p.grad.data + p.grad.numel());
  for (const Param& p : net.params())
    std::fill(p.grad.data, p.grad.data + p.grad.numel(), std::nanf(""));
  net.zero_grad_and_backward();
  for (size_t i = 0; i < want.size(); ++i) {
    const TensorView got = net.params()[i].grad;
    int64_t differ = 0;
    for (int64_t k = 0; k < got.numel(); ++k)
      differ += !(got[k] == want[i][static_cast<size_t>(k)]);  // -0 and +0 alike
    EXPECT_EQ(differ, 0) << net.params()[i].name << ": " << differ << " of " << got.numel();
  }

  // A threads plan's groups run on nets bound to the array's state, through
  // Model::train_steps: their gradients must hold this step's alone, not the garbage under them.
  auto threads = make_model(
      GetParam(), {.B = B, .batch_size = batch, .seed = seed, .plan = ExecutionPlan::threads(1)});
  for (const Param& p : threads->params())
    std::fill(p.grad.data, p.grad.data + p.grad.numel(), std::nanf(""));
  const Model::StepBatch step{batch_data.images(), batch_data.labels()};
  threads->train_steps({&step, 1}, nullptr);
  for (size_t i = 0; i < want.size(); ++i) {
    // Each model alone against the fused call: to rounding (as in StepLockedFusedEqualsSingle).
    const TensorView got = threads->params()[i].grad;
    double largest = 0.0;
    for (float w : want[i]) largest = std::max(largest, std::fabs(static_cast<double>(w)));
    int64_t far = 0;
    for (int64_t k = 0; k < got.numel(); ++k)
      far += !(std::fabs(got[k] - want[i][static_cast<size_t>(k)]) <= 1e-4 * largest + 1e-6);
    EXPECT_EQ(far, 0) << "threads plan: " << net.params()[i].name;  // NaN counts as far
  }
}

// Twelve steps on one batch of 16 (memorizing it) must lower every model's loss.
TEST_P(ModelArray, TrainingLowersTheLoss) {
  TrainedArray run = train(GetParam(), {0, 1}, {1e-3f, 3e-3f}, 12, 5, /*samples=*/16);
  for (int b = 0; b < 2; ++b) EXPECT_LT(run.losses.back()[b], run.losses.front()[b]);
}

TEST_P(ModelArray, ExtractInsertRoundTripsOneReplica) {
  auto model = make_model(GetParam(), {.B = 2, .batch_size = 4, .seed = 3, .model_ids = {}});
  std::vector<float> zero(static_cast<size_t>(model->params_per_model()), 0.5f);
  std::vector<float> other = model->extract(1);
  model->insert(0, zero);
  EXPECT_EQ(model->extract(0), zero);
  EXPECT_EQ(model->extract(1), other);
  EXPECT_THROW(model->insert(0, std::vector<float>(3)), Error);
  EXPECT_THROW(model->extract(2), Error);
}

TEST_P(ModelArray, PartialBatchesAndEvaluationWork) {
  auto model = make_model(GetParam(), {.B = 2, .batch_size = 8, .seed = 3, .model_ids = {}});
  Dataset data = make_synthetic(model->sample_shape(), 10, 13, 3);
  Loader loader(data, {.batch_size = 8, .shuffle = false, .drop_last = false});
  Batch batch = loader.make_batch();
  int64_t rows = 0;
  while (loader.next(batch)) {
    model->forward(batch.images(), batch.labels(), false);
    for (int64_t c : model->correct()) EXPECT_LE(c, batch.rows);
    rows += batch.rows;
  }
  EXPECT_EQ(rows, 13);
}

INSTANTIATE_TEST_SUITE_P(Models, ModelArray,
                         ::testing::Values("mlp", "lenet", "resnet18", "mobilenetv2",
                                           "mobilenetv3_small", "mobilenetv3_large"));

TEST(Model, FlopCountsAreWrittenDown) {
  // MLP: 784*256 + 256*256 + 256*10 multiply-adds; x2 forward, x2 weight grads, x2 input grads
  // except the first layer.
  auto mlp = make_model("mlp", {.B = 1, .batch_size = 1, .seed = 0, .model_ids = {}});
  const double macs_first = 784.0 * 256, macs_rest = 256.0 * 256 + 256.0 * 10;
  EXPECT_DOUBLE_EQ(mlp->train_flops_per_sample(), 2 * (2 * macs_first + 3 * macs_rest));
  EXPECT_EQ(mlp->params_per_model(), 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
  auto lenet = make_model("lenet", {.B = 1, .batch_size = 1, .seed = 0, .model_ids = {}});
  EXPECT_EQ(lenet->params_per_model(),
            32 * 25 + 32 + 64 * 32 * 25 + 64 + 3136 * 1024 + 1024 + 1024 * 10 + 10);
}

// An array whose arenas the machine cannot hold is refused when it is built, before any arena
// is zeroed, with the whole need, its parts and the ways out (not killed by the kernel).
TEST(Model, AnArrayTooBigForTheMachineIsRefusedWithWhatItNeeds) {
  // An MLP's activations take over 784 floats a sample: this batch needs more than is available.
  const int64_t batch =
      static_cast<int64_t>(available_memory_bytes() / (784 * sizeof(float))) + 1024;
  try {
    make_model("mlp", {.B = 2, .batch_size = batch, .seed = 0, .model_ids = {}});
    ADD_FAILURE() << "an MLP array with batch " << batch << " was built";
  } catch (const OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_GT(e.needed_bytes(), available_memory_bytes());
    for (const char* part : {"the arenas of 2 models (activations ", "activation gradients ",
                             "--plan chunk:C or threads:1"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
  }
}

TEST(Model, BadInputsNameTheProblem) {
  EXPECT_THROW(
      {
        try {
          make_model("resnet9000", {});
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("lenet"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  auto model = make_model("mlp", {.B = 2, .batch_size = 4, .seed = 0, .model_ids = {}});
  std::vector<float> images(5 * 784);
  std::vector<int32_t> labels(5);
  // More rows than the model was built for.
  EXPECT_THROW(model->forward(TensorView(images.data(), {5, 1, 28, 28}),
                              IndexView(labels.data(), {5}), true),
               Error);
  // Wrong sample shape.
  EXPECT_THROW(model->forward(TensorView(images.data(), {4, 1, 28, 35}),
                              IndexView(labels.data(), {4}), true),
               Error);
  // Label count differs from rows.
  EXPECT_THROW(model->forward(TensorView(images.data(), {4, 1, 28, 28}),
                              IndexView(labels.data(), {3}), true),
               Error);
  EXPECT_THROW(model->backward(), Error);  // no forward yet
  EXPECT_THROW(make_model("mlp", {.B = 0, .batch_size = 4, .seed = 0, .model_ids = {}}), Error);
}

}  // namespace
}  // namespace hfta
