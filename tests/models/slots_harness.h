// The slot tests' harness (tests/models/test_slots.cpp, test_slots_slow.cpp): the parameterized
// refill and compaction tests over one array case; each file instantiates its cases.
//
// Slots of a live array (models/slots.h): refill and compaction, end to end with the optimizer.
// For mlp, lenet, an MLP with dropout (dropout draws follow the refilled slot's new id and count)
// and resnet18 (BatchNorm buffers), at B in {2, 3, 5}, fused and under other plans:
//  (a) a refilled slot trains as a fresh model with its new id and hyperparameters: bitwise as
//      that slot of a fresh array of the same B and plan, and as the model alone (B = 1) to the
//      fused == serial tolerance of tests/models/test_models.cpp (a one-model array runs other
//      kernels: not bitwise);
//  (b) every other slot is bit-identical to the same array run without the refill;
//  (c) a compacted array holds the kept slots bit for bit (parameters, gradients, buffers, ids,
//      dropout counts, optimizer state) and continues as they do, to the plans' tolerance (its
//      plan runs groups of other sizes: mostly bitwise, not always).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "datasets/loader.h"
#include "datasets/synthetic.h"
#include "models/slots.h"
#include "optim/adam.h"
#include "test_util.h"

namespace hfta {
namespace {

constexpr float kLossRtol = 2e-5f;  // as tests/models/test_models.cpp

// An MLP with dropout: the dropout draws of a refilled slot must be those of its new model.
Value define_mlp_dropout(Net& n, Value images, int64_t num_classes) {
  Value h = n.dropout(n.relu(n.linear(images, "fc1", {.out_features = 64})), 0.3f);
  return n.linear(h, "fc2", {.out_features = num_classes});
}

struct SlotCase {
  std::string model;
  int64_t B;
  std::string plan;
};

std::string case_name(const testing::TestParamInfo<SlotCase>& info) {
  std::string plan = info.param.plan;
  for (char& c : plan)
    if (c == ':') c = '_';
  return info.param.model + "_B" + std::to_string(info.param.B) + "_" + plan;
}

int64_t batch_of(const SlotCase& c) { return c.model == "resnet18" ? 4 : 16; }

std::unique_ptr<Model> make(const SlotCase& c, uint64_t seed, std::vector<int64_t> ids,
                            bool alone = false) {
  ModelSpec spec{.B = static_cast<int64_t>(ids.size()),
                 .batch_size = batch_of(c),
                 .seed = seed,
                 .model_ids = std::move(ids),
                 .plan = alone ? ExecutionPlan::fused() : ExecutionPlan::parse(c.plan),
                 .threads = 2};
  // ResNet-18 on 16x16 images: every block and BatchNorm still runs, at a quarter of the cost.
  if (c.model == "resnet18") spec.sample_shape = Shape{3, 16, 16};
  if (c.model == "mlp_dropout") {
    spec.sample_shape = Shape{1, 28, 28};
    spec.num_classes = 10;
    return std::make_unique<Model>("mlp_dropout", spec, define_mlp_dropout);
  }
  return make_model(c.model, spec);
}

ParamTable table_of(const Model& model) {
  std::vector<TensorView> values;
  for (const Param& p : model.params()) values.push_back(p.value);
  return ParamTable::from_arena(model.param_arena(), values);
}

std::vector<int64_t> iota_ids(int64_t B) {
  std::vector<int64_t> ids(static_cast<size_t>(B));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

std::vector<float> floats(const TensorView& v) { return {v.data, v.data + v.numel()}; }

bool same_bits(const TensorView& a, const TensorView& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.data, b.data, sizeof(float) * static_cast<size_t>(a.numel())) == 0;
}

// Model b's floats of an optimizer state buffer laid out like the parameters.
std::vector<float> state_of(const Model& m, const Optimizer& opt, int i, int64_t b) {
  std::vector<float> out;
  for (const ParamSegment& s : opt.table().segments) {
    const float* p = opt.state_buffer(i) + s.offset + b * s.per_model_numel;
    out.insert(out.end(), p, p + s.per_model_numel);
  }
  return out;
}

// |a - b| <= rtol * max|b| + atol over one tensor.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, double rtol,
                  double atol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0.0, worst = 0.0;
  for (float x : b) scale = std::max(scale, std::fabs(double(x)));
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(double(a[i]) - double(b[i]));
    if (!(err <= worst)) worst = err;
  }
  EXPECT_LE(worst, rtol * scale + atol) << what << " (largest value " << scale << ")";
}

// Steps over which two runs that round differently (another group size or thread count) stay
// within the tolerances below: ResNet-18's 4-row BatchNorms on 16x16 images grow rounding by
// orders of magnitude per step (as MobileNetV2's, tests/models/test_plans.cpp), and on AVX2 the
// runs do round differently (oneDNN splits a lone model's weight-gradient sum over the threads),
// so one step there.
int tolerant_steps(const SlotCase& c) { return c.model == "resnet18" ? 1 : 3; }

std::vector<float> base_lr(int64_t B) {
  std::vector<float> lr;
  for (int64_t b = 0; b < B; ++b) lr.push_back(1e-3f * float(b + 1));
  return lr;
}

const SlotHyper kRefill{
    .lr = 4e-3f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-7f, .weight_decay = 1e-3f};

class Slots : public testing::TestWithParam<SlotCase> {};

TEST_P(Slots, RefilledSlotTrainsAsAFreshModelAndOthersAreUntouched) {
  const SlotCase& c = GetParam();
  const uint64_t seed = test::case_seed(case_name({c, 0}));
  HFTA_CASE_TRACE(seed);
  const int64_t B = c.B, j = B / 2, new_id = 100 + j, batch = batch_of(c);
  const size_t nj = static_cast<size_t>(j);
  auto array = make(c, seed, iota_ids(B)), ref = make(c, seed, iota_ids(B));
  FusedAdam opt(table_of(*array), AdamHyper{.lr = base_lr(B)});
  FusedAdam ref_opt(table_of(*ref), AdamHyper{.lr = base_lr(B)});
  Dataset data = make_synthetic(array->sample_shape(), 10, 8 * batch, seed);
  Loader loader(data, {.batch_size = batch, .seed = seed});
  Batch bd = loader.make_batch();
  auto next = [&] {
    if (!loader.next(bd)) loader.next(bd);
  };
  for (int step = 0; step < 2; ++step) {
    next();
    array->train_step(bd.images(), bd.labels());
    ref->train_step(bd.images(), bd.labels());
    opt.step(array->param_arena(), array->grad_arena());
    ref_opt.step(ref->param_arena(), ref->grad_arena());
  }

  array->reinit_slot(j, new_id);
  opt.reset_slot(j, kRefill);
  EXPECT_EQ(array->spec().model_ids[nj], new_id);
  // The same slot of a fresh array (same B and plan: the same kernels, so bitwise), and the model
  // alone (B = 1), both with the new id and hyperparameters.
  std::vector<int64_t> fresh_ids = iota_ids(B);
  fresh_ids[nj] = new_id;
  auto fresh = make(c, seed, fresh_ids);
  AdamHyper fresh_hyper{.lr = base_lr(B), .beta1 = {}, .beta2 = {}, .eps = {}, .weight_decay = {}};
  for (int64_t b = 0; b < B; ++b) {
    const bool r = b == j;
    fresh_hyper.beta1.push_back(r ? *kRefill.beta1 : 0.9f);
    fresh_hyper.beta2.push_back(r ? *kRefill.beta2 : 0.999f);
    fresh_hyper.eps.push_back(r ? *kRefill.eps : 1e-8f);
    fresh_hyper.weight_decay.push_back(r ? *kRefill.weight_decay : 0.0f);
  }
  fresh_hyper.lr[nj] = *kRefill.lr;
  FusedAdam fresh_opt(table_of(*fresh), fresh_hyper);
  auto alone = make(c, seed, {new_id}, /*alone=*/true);
  FusedAdam alone_opt(table_of(*alone), AdamHyper{.lr = {*kRefill.lr},
                                                  .beta1 = {*kRefill.beta1},
                                                  .beta2 = {*kRefill.beta2},
                                                  .eps = {*kRefill.eps},
                                                  .weight_decay = {*kRefill.weight_decay}});
  EXPECT_EQ(array->extract(j), alone->extract(0)) << "initial weights of the refilled slot";
  for (size_t i = 0; i < array->buffers().size(); ++i)
    EXPECT_TRUE(same_bits(array->buffers()[i].value.replica(j), alone->buffers()[i].value))
        << array->buffers()[i].name;
  for (int i = 0; i < opt.num_state_buffers(); ++i)
    for (float x : state_of(*array, opt, i, j)) ASSERT_EQ(x, 0.0f);

  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(fmt::format("step {} after the refill of slot {}", step, j));
    next();
    for (Model* m : {array.get(), ref.get(), fresh.get(), alone.get()})
      m->train_step(bd.images(), bd.labels());
    for (int64_t b = 0; b < B; ++b) {
      const Model& same = b == j ? *fresh : *ref;  // bitwise
      EXPECT_EQ(array->losses()[b], same.losses()[b]) << "loss of slot " << b;
      EXPECT_EQ(array->correct()[b], same.correct()[b]) << "slot " << b;
      for (size_t i = 0; i < array->params().size(); ++i)
        EXPECT_TRUE(same_bits(array->params()[i].grad.replica(b), same.params()[i].grad.replica(b)))
            << array->params()[i].name << " gradient of slot " << b;
    }
    if (step < tolerant_steps(c)) {
      EXPECT_NEAR(array->losses()[j], alone->losses()[0], kLossRtol * alone->losses()[0]);
      for (size_t i = 0; i < array->params().size(); ++i)
        expect_close(floats(array->params()[i].grad.replica(j)), floats(alone->params()[i].grad),
                     1e-4, 1e-6, array->params()[i].name + " gradient vs alone");
    }
    opt.step(array->param_arena(), array->grad_arena());
    ref_opt.step(ref->param_arena(), ref->grad_arena());
    fresh_opt.step(fresh->param_arena(), fresh->grad_arena());
    alone_opt.step(alone->param_arena(), alone->grad_arena());
  }
  for (int64_t b = 0; b < B; ++b) {
    const Model& same = b == j ? *fresh : *ref;
    const Optimizer& same_opt = b == j ? static_cast<const Optimizer&>(fresh_opt) : ref_opt;
    EXPECT_EQ(array->extract(b), same.extract(b)) << "parameters of slot " << b;
    for (size_t i = 0; i < array->buffers().size(); ++i)
      EXPECT_TRUE(
          same_bits(array->buffers()[i].value.replica(b), same.buffers()[i].value.replica(b)))
          << array->buffers()[i].name << " of slot " << b;
    for (int i = 0; i < opt.num_state_buffers(); ++i)
      EXPECT_EQ(state_of(*array, opt, i, b), state_of(same, same_opt, i, b))
          << "Adam state " << i << " of slot " << b;
    EXPECT_EQ(opt.steps()[b], same_opt.steps()[b]) << "slot " << b;
  }
  EXPECT_EQ(opt.steps()[j], 3);
  if (tolerant_steps(c) < 3) return;  // the slot equals the fresh array's bitwise (above)
  test::expect_adam_parameters_agree(array->extract(j), alone->extract(0), *kRefill.lr,
                                     "slot vs alone");
  for (size_t i = 0; i < array->buffers().size(); ++i)
    expect_close(floats(array->buffers()[i].value.replica(j)), floats(alone->buffers()[i].value),
                 1e-5, 1e-7, array->buffers()[i].name + " vs alone");
  for (int i = 0; i < opt.num_state_buffers(); ++i)
    expect_close(state_of(*array, opt, i, j), state_of(*alone, alone_opt, i, 0), 1e-3, 1e-12,
                 fmt::format("Adam state {} vs alone", i));
}

std::vector<int64_t> keep_for(int64_t B) {
  if (B == 2) return {1};
  if (B == 3) return {2, 0};
  return {0, 2, 3};
}

TEST_P(Slots, CompactedArrayContinuesAsTheKeptSlots) {
  const SlotCase& c = GetParam();
  const uint64_t seed = test::case_seed(case_name({c, 0}) + "compact");
  HFTA_CASE_TRACE(seed);
  const int64_t B = c.B, batch = batch_of(c);
  const std::vector<int64_t> keep = keep_for(B);
  auto array = make(c, seed, iota_ids(B));
  FusedAdam opt(table_of(*array), AdamHyper{.lr = base_lr(B)});
  Dataset data = make_synthetic(array->sample_shape(), 10, 8 * batch, seed);
  Loader loader(data, {.batch_size = batch, .seed = seed});
  Batch bd = loader.make_batch();
  auto next = [&] {
    if (!loader.next(bd)) loader.next(bd);
  };
  for (int step = 0; step < 3; ++step) {
    if (step == 1) {  // kept slots with their own ids, dropout counts and hyperparameters
      array->reinit_slot(keep[0], 77);
      opt.reset_slot(keep[0], kRefill);
    }
    next();
    array->train_step(bd.images(), bd.labels());
    opt.step(array->param_arena(), array->grad_arena());
  }
  std::unique_ptr<Model> small = compact(*array, keep);
  std::unique_ptr<Optimizer> small_opt = compact_optimizer(opt, small->net(), keep);
  ASSERT_EQ(small->B(), static_cast<int64_t>(keep.size()));
  EXPECT_EQ(small->net().training_forwards(), array->net().training_forwards());
  for (size_t i = 0; i < keep.size(); ++i) {
    const int64_t b = static_cast<int64_t>(i), from = keep[i];
    EXPECT_EQ(small->spec().model_ids[i], array->spec().model_ids[static_cast<size_t>(from)]);
    EXPECT_EQ(small->net().forward_origins()[i],
              array->net().forward_origins()[static_cast<size_t>(from)]);
    EXPECT_EQ(small->extract(b), array->extract(from));
    for (size_t p = 0; p < small->params().size(); ++p)
      EXPECT_TRUE(
          same_bits(small->params()[p].grad.replica(b), array->params()[p].grad.replica(from)));
    for (size_t p = 0; p < small->buffers().size(); ++p)
      EXPECT_TRUE(
          same_bits(small->buffers()[p].value.replica(b), array->buffers()[p].value.replica(from)));
    for (int s = 0; s < opt.num_state_buffers(); ++s)
      EXPECT_EQ(state_of(*small, *small_opt, s, b), state_of(*array, opt, s, from));
    EXPECT_EQ(small_opt->steps()[b], opt.steps()[from]);
    EXPECT_EQ(small_opt->lr()[b], opt.lr()[from]);
  }
  int64_t covered = 0;
  for (const PlanGroup& g : small->layout().groups) covered += g.count;
  EXPECT_EQ(covered, small->B()) << "the plan is laid out for the new B";

  // The compacted array runs its models in groups of other sizes (and ops on other thread
  // counts) than the original's plan did, so kernels may round differently: the plans'
  // tolerance (tests/models/test_plans.cpp). Most cases agree bitwise; none must diverge.
  for (int step = 0; step < tolerant_steps(c); ++step) {
    SCOPED_TRACE(fmt::format("step {} after compaction", step));
    next();
    array->train_step(bd.images(), bd.labels());
    small->train_step(bd.images(), bd.labels());
    for (size_t i = 0; i < keep.size(); ++i) {
      const int64_t b = static_cast<int64_t>(i), from = keep[i];
      const float loss = array->losses()[static_cast<size_t>(from)];
      EXPECT_NEAR(small->losses()[i], loss, 2e-5 * std::fabs(loss)) << "slot " << from;
      EXPECT_EQ(small->correct()[i], array->correct()[static_cast<size_t>(from)]);
      for (size_t p = 0; p < small->params().size(); ++p)
        expect_close(floats(small->params()[p].grad.replica(b)),
                     floats(array->params()[p].grad.replica(from)), 1e-4, 1e-7,
                     fmt::format("{} gradient of slot {}", small->params()[p].name, from));
    }
    opt.step(array->param_arena(), array->grad_arena());
    small_opt->step(small->param_arena(), small->grad_arena());
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    const int64_t b = static_cast<int64_t>(i), from = keep[i];
    test::expect_adam_parameters_agree(small->extract(b), array->extract(from), opt.lr()[from],
                                       fmt::format("parameters of slot {}", from));
    for (size_t p = 0; p < small->buffers().size(); ++p)
      expect_close(floats(small->buffers()[p].value.replica(b)),
                   floats(array->buffers()[p].value.replica(from)), 1e-5, 1e-7,
                   fmt::format("{} of slot {}", small->buffers()[p].name, from));
    EXPECT_EQ(small_opt->steps()[b], opt.steps()[from]);
  }
}

}  // namespace
}  // namespace hfta
