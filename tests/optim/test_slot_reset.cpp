// Slots of a live array, the optimizer's side (optim/optimizer.h reset_slot and compact,
// optim/lr_schedule.h PerModelLrSchedule): a refilled slot steps bitwise as a fresh one-model
// optimizer with its new hyperparameters, from the refill on; the other slots step bitwise as
// without the refill; a compacted optimizer continues bitwise as the kept slots of the original.
// Optimizer updates are elementwise with per-model constants, so every comparison is bitwise.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "core/error.h"
#include "optim/lr_schedule.h"
#include "optim_harness.h"

namespace hfta {
namespace {

using test::Array;
using test::expect_bitwise;
using test::GradSteps;

// One optimizer kind: how to build it for B models, the refill's hyperparameters, and the same
// as a one-model hyper struct.
struct OptCase {
  std::string name;
  std::function<std::unique_ptr<Optimizer>(const ParamTable&, int64_t B)> make_array;
  SlotHyper refill;
  std::function<std::unique_ptr<Optimizer>(const ParamTable&)> make_refilled_alone;
};

std::vector<OptCase> cases() {
  std::vector<OptCase> out;
  out.push_back({"adam",
                 [](const ParamTable& t, int64_t) {
                   return std::make_unique<FusedAdam>(
                       t, AdamHyper{.lr = {1e-3f, 2e-3f, 3e-3f}, .weight_decay = {1e-2f}});
                 },
                 {.lr = 5e-3f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-6f, .weight_decay = 0.1f},
                 [](const ParamTable& t) {
                   return std::make_unique<FusedAdam>(t, AdamHyper{.lr = {5e-3f},
                                                                   .beta1 = {0.8f},
                                                                   .beta2 = {0.99f},
                                                                   .eps = {1e-6f},
                                                                   .weight_decay = {0.1f}});
                 }});
  out.push_back({"adamw",
                 [](const ParamTable& t, int64_t) {
                   return std::make_unique<FusedAdamW>(
                       t, AdamHyper{.lr = {1e-3f, 2e-3f, 3e-3f}, .weight_decay = {1e-2f}});
                 },
                 {.lr = 4e-3f, .beta1 = 0.7f, .weight_decay = 0.05f},
                 [](const ParamTable& t) {
                   // Fields not given keep the slot's: beta2, eps as the array's defaults.
                   return std::make_unique<FusedAdamW>(
                       t, AdamHyper{.lr = {4e-3f}, .beta1 = {0.7f}, .weight_decay = {0.05f}});
                 }});
  // The array has no momentum: the refilled slot's momentum adds the buffer.
  out.push_back(
      {"sgd_gains_momentum",
       [](const ParamTable& t, int64_t) {
         return std::make_unique<FusedSgd>(t, SgdHyper{.lr = {0.01f, 0.02f, 0.03f}});
       },
       {.lr = 0.05f, .weight_decay = 1e-3f, .momentum = 0.9f, .nesterov = true},
       [](const ParamTable& t) {
         return std::make_unique<FusedSgd>(
             t,
             SgdHyper{.lr = {0.05f}, .momentum = {0.9f}, .weight_decay = {1e-3f}, .nesterov = {1}});
       }});
  out.push_back({"sgd_momentum",
                 [](const ParamTable& t, int64_t) {
                   return std::make_unique<FusedSgd>(
                       t, SgdHyper{.lr = {0.01f, 0.02f, 0.03f}, .momentum = {0.9f, 0.5f, 0.0f}});
                 },
                 {.lr = 0.04f, .momentum = 0.8f, .dampening = 0.1f},
                 [](const ParamTable& t) {
                   return std::make_unique<FusedSgd>(
                       t, SgdHyper{.lr = {0.04f}, .momentum = {0.8f}, .dampening = {0.1f}});
                 }});
  out.push_back(
      {"adadelta",
       [](const ParamTable& t, int64_t) {
         return std::make_unique<FusedAdadelta>(t, AdadeltaHyper{.lr = {1.0f, 0.5f, 0.1f}});
       },
       {.lr = 0.7f, .eps = 1e-5f, .rho = 0.8f},
       [](const ParamTable& t) {
         return std::make_unique<FusedAdadelta>(
             t, AdadeltaHyper{.lr = {0.7f}, .rho = {0.8f}, .eps = {1e-5f}});
       }});
  // No model of the array has momentum or centering: the refilled slot adds both buffers.
  out.push_back(
      {"rmsprop_gains_buffers",
       [](const ParamTable& t, int64_t) {
         return std::make_unique<FusedRmsprop>(t, RmspropHyper{.lr = {1e-2f, 1e-3f, 5e-3f}});
       },
       {.lr = 2e-3f, .momentum = 0.5f, .alpha = 0.9f, .centered = true},
       [](const ParamTable& t) {
         return std::make_unique<FusedRmsprop>(
             t, RmspropHyper{.lr = {2e-3f}, .alpha = {0.9f}, .momentum = {0.5f}, .centered = {1}});
       }});
  return out;
}

std::string case_name(const testing::TestParamInfo<OptCase>& info) { return info.param.name; }

class SlotReset : public testing::TestWithParam<OptCase> {};

std::vector<std::vector<float>> states(const Array& a, const Optimizer& opt, int64_t b) {
  std::vector<std::vector<float>> out;
  for (int i = 0; i < opt.num_state_buffers(); ++i) out.push_back(a.model(opt.state_buffer(i), b));
  return out;
}

// k steps, refill slot j, k more: slot j against a fresh one-model optimizer started from slot
// j's parameters at the refill; every other slot against the same array without the refill.
TEST_P(SlotReset, RefilledSlotStepsAsAFreshOptimizerAndOthersAreUntouched) {
  const OptCase& c = GetParam();
  const uint64_t seed = test::case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  const int64_t B = 3, k = 4;
  Array a(B, test::kSizes), ref(B, test::kSizes), solo(1, test::kSizes);
  auto opt = c.make_array(a.table, B), ref_opt = c.make_array(ref.table, B);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> init = test::random_vector(a.per_model(), rng);
    a.set_model(a.p(), b, init);
    ref.set_model(ref.p(), b, init);
  }
  const GradSteps grads = test::random_grads(2 * k, B, a.per_model(), rng);
  for (int64_t j = 0; j < B; ++j) {
    SCOPED_TRACE(fmt::format("refilled slot {}", j));
    std::unique_ptr<Optimizer> alone;
    for (int64_t t = 0; t < 2 * k; ++t) {
      if (t == k) {
        opt->reset_slot(j, c.refill);
        EXPECT_EQ(opt->steps()[j], 0);
        EXPECT_EQ(opt->skip_counts()[j], 0);
        for (const auto& s : states(a, *opt, j))
          expect_bitwise(s, std::vector<float>(s.size(), 0.0f), "state after the refill");
        solo.set_model(solo.p(), 0, a.model(a.p(), j));
        alone = c.make_refilled_alone(solo.table);
        EXPECT_EQ(opt->lr()[j], alone->lr()[0]);
      }
      for (int64_t b = 0; b < B; ++b) {
        a.set_model(a.g(), b, grads[t][b]);
        ref.set_model(ref.g(), b, grads[t][b]);
      }
      opt->step(a.p(), a.g());
      ref_opt->step(ref.p(), ref.g());
      if (alone) {
        solo.set_model(solo.g(), 0, grads[t][j]);
        alone->step(solo.p(), solo.g());
      }
    }
    expect_bitwise(a.model(a.p(), j), solo.model(solo.p(), 0), "refilled slot vs alone");
    // States by role: the one-model optimizer may lack buffers other slots need (momentum).
    if (opt->num_state_buffers() == alone->num_state_buffers())
      for (int i = 0; i < opt->num_state_buffers(); ++i)
        expect_bitwise(a.model(opt->state_buffer(i), j), solo.model(alone->state_buffer(i), 0),
                       fmt::format("state {} vs alone", i));
    EXPECT_EQ(opt->steps()[j], alone->steps()[0]);
    for (int64_t b = 0; b < B; ++b) {
      if (b == j) continue;
      expect_bitwise(a.model(a.p(), b), ref.model(ref.p(), b), fmt::format("slot {}", b));
      for (int i = 0; i < ref_opt->num_state_buffers(); ++i)
        expect_bitwise(a.model(opt->state_buffer(i), b), ref.model(ref_opt->state_buffer(i), b),
                       fmt::format("slot {} state {}", b, i));
      EXPECT_EQ(opt->steps()[b], ref_opt->steps()[b]);
    }
    // The next slot starts from equal arrays again.
    opt = c.make_array(a.table, B);
    ref_opt = c.make_array(ref.table, B);
    for (int64_t b = 0; b < B; ++b) a.set_model(a.p(), b, ref.model(ref.p(), b));
  }
}

// k steps, compact to slots {2, 0}, k more: the compacted optimizer continues bitwise as slots 2
// and 0 of the original.
TEST_P(SlotReset, CompactedOptimizerContinuesAsTheKeptSlots) {
  const OptCase& c = GetParam();
  const uint64_t seed = test::case_seed(c.name + "compact");
  HFTA_CASE_TRACE(seed);
  RngStream rng(seed, 0);
  const int64_t B = 3, k = 3;
  const std::vector<int64_t> keep = {2, 0};
  Array a(B, test::kSizes), small(2, test::kSizes);
  auto opt = c.make_array(a.table, B);
  // A refill first, so the kept slots differ in hyperparameters, step counts and buffers.
  opt->reset_slot(0, c.refill);
  for (int64_t b = 0; b < B; ++b) a.set_model(a.p(), b, test::random_vector(a.per_model(), rng));
  const GradSteps grads = test::random_grads(2 * k, B, a.per_model(), rng);
  std::unique_ptr<Optimizer> compacted;
  for (int64_t t = 0; t < 2 * k; ++t) {
    if (t == k) {
      for (size_t i = 0; i < keep.size(); ++i)
        small.set_model(small.p(), static_cast<int64_t>(i), a.model(a.p(), keep[i]));
      compacted = opt->compact(small.table, keep);
      EXPECT_EQ(compacted->name(), opt->name());
      ASSERT_EQ(compacted->num_state_buffers(), opt->num_state_buffers());
      for (size_t i = 0; i < keep.size(); ++i) {
        EXPECT_EQ(compacted->steps()[i], opt->steps()[keep[i]]);
        EXPECT_EQ(compacted->lr()[i], opt->lr()[keep[i]]);
        for (int s = 0; s < opt->num_state_buffers(); ++s)
          expect_bitwise(small.model(compacted->state_buffer(s), static_cast<int64_t>(i)),
                         a.model(opt->state_buffer(s), keep[i]), "state right after compact");
      }
    }
    for (int64_t b = 0; b < B; ++b) a.set_model(a.g(), b, grads[t][b]);
    opt->step(a.p(), a.g());
    if (compacted) {
      for (size_t i = 0; i < keep.size(); ++i)
        small.set_model(small.g(), static_cast<int64_t>(i), grads[t][keep[i]]);
      compacted->step(small.p(), small.g());
    }
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    const int64_t b = static_cast<int64_t>(i);
    expect_bitwise(small.model(small.p(), b), a.model(a.p(), keep[i]),
                   fmt::format("compacted slot {} vs slot {}", i, keep[i]));
    for (int s = 0; s < opt->num_state_buffers(); ++s)
      expect_bitwise(small.model(compacted->state_buffer(s), b),
                     a.model(opt->state_buffer(s), keep[i]), fmt::format("state {}", s));
    EXPECT_EQ(compacted->steps()[i], opt->steps()[keep[i]]);
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, SlotReset, testing::ValuesIn(cases()), case_name);

TEST(SlotResetErrors, BadSlotsAndHyperparametersChangeNothing) {
  Array a(3, {5, 9});
  FusedAdam adam(a.table, AdamHyper{.lr = {1e-3f, 2e-3f, 3e-3f}});
  test::expect_error([&] { adam.reset_slot(3, {.lr = 0.1f}); },
                     "Adam: cannot refill slot 3: the array has slots 0..2");
  test::expect_error([&] { adam.reset_slot(-1, {}); },
                     "Adam: cannot refill slot -1: the array has slots 0..2");
  test::expect_error([&] { adam.reset_slot(1, {.beta1 = 1.0f}); },
                     "model 1: beta1 = 1 is out of range: expected 0 <= beta1 < 1");
  test::expect_error([&] { adam.reset_slot(1, {.momentum = 0.9f}); },
                     "Adam has no hyperparameter momentum: a refilled slot of a Adam array takes "
                     "only lr, beta1, beta2, eps, weight_decay");
  EXPECT_EQ(adam.hyper().beta1[1], 0.9f);
  EXPECT_EQ(adam.hyper().lr[1], 2e-3f);
  FusedSgd sgd(a.table, SgdHyper{});
  EXPECT_THROW(sgd.reset_slot(0, {.beta2 = 0.9f}), Error);
  EXPECT_THROW(sgd.reset_slot(0, {.nesterov = true}), Error);  // Nesterov without momentum
  EXPECT_EQ(sgd.num_state_buffers(), 0);
  EXPECT_THROW(SlotHyper::from_named({{"learning_rate", 0.1f}}), Error);
  const SlotHyper h = SlotHyper::from_named({{"lr", 0.1f}, {"nesterov", 1.0f}});
  EXPECT_EQ(h.lr, 0.1f);
  EXPECT_EQ(h.nesterov, true);
  EXPECT_EQ(h.names_set(), "lr, nesterov");

  Array two(2, {5, 9}), other(2, {5, 8});
  test::expect_error([&] { adam.compact(two.table, std::vector<int64_t>{}); },
                     "Adam: compacting to no models: keep at least one slot (or drop the whole "
                     "array)");
  test::expect_error(
      [&] {
        adam.compact(two.table, std::vector<int64_t>{1, 1});
      },
      "Adam: slot 1 is kept twice: list each kept slot once (1,1)");
  test::expect_error(
      [&] {
        adam.compact(two.table, std::vector<int64_t>{0, 3});
      },
      "Adam: cannot keep slot 3: the array has slots 0..2");
  EXPECT_THROW(adam.compact(two.table, std::vector<int64_t>{0}), Error);       // B mismatch
  EXPECT_THROW(adam.compact(other.table, std::vector<int64_t>{0, 1}), Error);  // other tensors
}

TEST(PerModelLrSchedule, RefillAndCompact) {
  PerModelLrSchedule s(LrSchedule::cosine(10), 3);
  s.reset_slot(1, LrSchedule::step_decay(2, 0.5f).with_warmup(2));
  EXPECT_THROW(s.reset_slot(3, LrSchedule::constant()), Error);
  EXPECT_THROW(s.reset_slot(0, LrSchedule::step_decay(0, 0.5f)), Error);
  const std::vector<float> base = {1.0f, 2.0f, 3.0f};
  const std::vector<int64_t> t = {5, 1, 5};
  std::vector<float> lr(3);
  s.compute(base, t, lr);
  EXPECT_EQ(lr[0], static_cast<float>(LrSchedule::cosine(10).lr_at(1.0, 5)));
  EXPECT_EQ(lr[1],
            static_cast<float>(LrSchedule::step_decay(2, 0.5f).with_warmup(2).lr_at(2.0, 1)));
  const PerModelLrSchedule c = s.compact(std::vector<int64_t>{1});
  ASSERT_EQ(c.schedules.size(), 1u);
  EXPECT_EQ(c.schedules[0].kind, LrScheduleKind::kStep);
  EXPECT_THROW(s.compact(std::vector<int64_t>{0, 0}), Error);
}

}  // namespace
}  // namespace hfta
