// Execution plans (models/plan.h): every plan trains the same models as fused. For each model and
// plan, one array under the plan and one fused array start from the same seed and take the same
// steps; losses, correct counts, every gradient, the BatchNorm statistics and the parameters after
// Adam steps must agree to rounding (plans run the models in groups of other sizes, so kernels may
// sum in another order: not bitwise). Also: the layouts plans produce, and the errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>

#include "core/error.h"
#include "datasets/loader.h"
#include "datasets/synthetic.h"
#include "models/model.h"
#include "optim/adam.h"
#include "test_util.h"

namespace hfta {
namespace {

ParamTable table_of(const Model& model) {
  std::vector<TensorView> values;
  for (const Param& p : model.params()) values.push_back(p.value);
  return ParamTable::from_arena(model.param_arena(), values);
}

// |a - b| <= rtol * max|a| + atol over a whole tensor: gradients of different magnitudes per
// tensor, compared to rounding of their largest values.
void expect_close(const TensorView& a, const TensorView& b, double rtol, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  double scale = 0.0, worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) scale = std::max(scale, std::fabs(double(a[i])));
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double err = std::fabs(double(a[i]) - double(b[i]));
    if (!(err <= worst)) worst = err;
  }
  EXPECT_LE(worst, rtol * scale + 1e-7) << what << " (largest value " << scale << ")";
}

struct PlanCase {
  std::string model;
  int64_t B;
  std::string plan;
  int threads;  // workers of the threads plan
};

std::string case_name(const testing::TestParamInfo<PlanCase>& info) {
  std::string plan = info.param.plan;
  for (char& c : plan)
    if (c == ':' || c == '/' || c == '+') c = '_';
  return info.param.model + "_B" + std::to_string(info.param.B) + "_" + plan + "_t" +
         std::to_string(info.param.threads);
}

class PlanEquivalence : public testing::TestWithParam<PlanCase> {};

TEST_P(PlanEquivalence, TrainsTheSameModelsAsFused) {
  const PlanCase& c = GetParam();
  const uint64_t seed = test::case_seed(case_name({c, 0}));
  HFTA_CASE_TRACE(seed);
  const bool small_images = c.model == "resnet18" || c.model.starts_with("mobilenet");
  const int64_t batch = small_images ? 4 : 16;
  ModelSpec spec{.B = c.B, .batch_size = batch, .seed = seed, .dropout = 0.3f};
  if (small_images) spec.dropout.reset();
  auto fused = make_model(c.model, spec);
  spec.plan = ExecutionPlan::parse(c.plan);
  spec.threads = c.threads;
  auto planned = make_model(c.model, spec);
  // A plan with one group is reported as fused.
  ASSERT_EQ(planned->plan(), planned->layout().is_fused() ? ExecutionPlan::fused() : spec.plan);

  std::vector<float> lr;
  for (int64_t b = 0; b < c.B; ++b) lr.push_back(1e-3f * static_cast<float>(b + 1));
  FusedAdam opt_fused(table_of(*fused), AdamHyper{.lr = lr});
  FusedAdam opt_planned(table_of(*planned), AdamHyper{.lr = lr});
  Dataset data = make_synthetic(fused->sample_shape(), 10, 4 * batch, seed);
  Loader loader(data, {.batch_size = batch, .seed = seed});
  Batch batch_data = loader.make_batch();
  // MobileNetV2 at batch 4 normalizes 1x1 maps over 4 rows: rounding grows by orders of
  // magnitude per step (tests/models/test_models.cpp skips its trajectory), so one step there.
  // ResNet-18's 4-row BatchNorms on 16x16 images do the same once the two runs round differently,
  // which they do on AVX2 (oneDNN's AVX2 convolutions split a model's weight-gradient sum over
  // the threads when it runs alone, not when it has a thread of its own): one step there too.
  const int steps = small_images ? 1 : 3;
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    if (!loader.next(batch_data)) loader.next(batch_data);
    fused->train_step(batch_data.images(), batch_data.labels());
    // The planned array updates each block right after its backward, on its worker, as
    // tasks/classifier/train_loop.cpp's array_step does.
    float* planned_params = reinterpret_cast<float*>(planned->param_arena().data());
    const float* planned_grads = reinterpret_cast<const float*>(planned->grad_arena().data());
    std::vector<int64_t> updates(static_cast<size_t>(c.B), 0);
    planned->train_step(batch_data.images(), batch_data.labels(),
                        [&](int64_t first, int64_t count) {
                          for (int64_t b = first; b < first + count; ++b) ++updates[b];
                          opt_planned.step_models(planned_params, planned_grads, first, count);
                        });
    EXPECT_EQ(updates, std::vector<int64_t>(static_cast<size_t>(c.B), 1));
    EXPECT_FALSE(opt_planned.finish_model_steps().any_skipped());
    for (int64_t b = 0; b < c.B; ++b) {
      EXPECT_NEAR(planned->losses()[b], fused->losses()[b], 2e-5 * std::fabs(fused->losses()[b]))
          << "model " << b;
      EXPECT_EQ(planned->correct()[b], fused->correct()[b]) << "model " << b;
    }
    for (size_t i = 0; i < fused->params().size(); ++i)
      for (int64_t b = 0; b < c.B; ++b)
        expect_close(planned->params()[i].grad.replica(b), fused->params()[i].grad.replica(b), 1e-4,
                     fused->params()[i].name + " gradient, model " + std::to_string(b));
    for (size_t i = 0; i < fused->buffers().size(); ++i)
      expect_close(planned->buffers()[i].value, fused->buffers()[i].value, 1e-5,
                   fused->buffers()[i].name);
    opt_fused.step(fused->param_arena(), fused->grad_arena());
  }
  for (int64_t b = 0; b < c.B; ++b)
    test::expect_adam_parameters_agree(planned->extract(b), fused->extract(b), lr[b],
                                       "model " + std::to_string(b));
  // Evaluation runs under the plan too.
  loader.next(batch_data);
  fused->forward(batch_data.images(), batch_data.labels(), false);
  planned->forward(batch_data.images(), batch_data.labels(), false);
  for (int64_t b = 0; b < c.B; ++b)
    EXPECT_NEAR(planned->losses()[b], fused->losses()[b], 2e-5 * std::fabs(fused->losses()[b]));
}

std::vector<PlanCase> plan_cases() {
  std::vector<PlanCase> cases;
  for (const char* model : {"mlp", "lenet"})
    for (int64_t B : {1, 2, 3, 5}) {
      for (const char* plan : {"chunk:1", "chunk:2", "threads"})
        cases.push_back({model, B, plan, 2});
      if (B == 5) {  // uneven chunks and three workers
        cases.push_back({model, B, "chunk:3", 2});
        cases.push_back({model, B, "threads", 3});
        cases.push_back({model, B, "threads:1", 2});
        cases.push_back({model, B, "threads:2", 2});
        cases.push_back({model, B, "threads+fused", 2});    // 2 + 2, then 1 fused
        cases.push_back({model, B, "threads:1+fused", 3});  // 1 + 1 + 1, then 2 fused
      }
      if (B == 3) cases.push_back({model, B, "threads:1+fused", 2});  // 1 + 1, then 1 fused
    }
  for (const char* model : {"resnet18", "mobilenetv2", "mobilenetv3_small", "mobilenetv3_large"}) {
    cases.push_back({model, 3, "chunk:2", 2});
    cases.push_back({model, 3, "threads", 2});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Plans, PlanEquivalence, testing::ValuesIn(plan_cases()), case_name);

// A plan with /K visits each group for K steps in a row (models/plan.h): every model then computes
// bit for bit what it computes under the same plan one step at a time (the same kernels on the
// same group sizes, only the order of the groups changes), which PlanEquivalence relates to
// fused. Two whole visits and a shorter one, on distinct minibatches (a step that read another
// step's batch would differ), with Adam updating each group after each backward.
struct VisitCase {
  std::string model;
  int64_t B;
  std::string plan;  // with /K
};

class PlanVisits : public testing::TestWithParam<VisitCase> {};

TEST_P(PlanVisits, EqualOneStepAtATimeBitForBit) {
  const VisitCase& c = GetParam();
  const uint64_t seed = test::case_seed(case_name({{c.model, c.B, c.plan, 2}, 0}));
  HFTA_CASE_TRACE(seed);
  const int64_t batch = 8;
  ModelSpec spec{.B = c.B, .batch_size = batch, .seed = seed, .threads = 2};
  if (c.model.rfind("pointnet", 0) == 0) spec.sample_shape = {64, 3};  // small clouds
  spec.plan = ExecutionPlan::parse(c.plan);
  auto visits = make_model(c.model, spec);
  const int64_t K = visits->layout().steps_per_visit;
  ASSERT_GT(K, 1) << c.plan;
  spec.plan.steps = 1;
  spec.plan.balanced = false;  // +balanced's parts, one step at a time: threads:1
  auto single = make_model(c.model, spec);
  ASSERT_EQ(single->layout().steps_per_visit, 1);

  std::vector<float> lr;
  for (int64_t b = 0; b < c.B; ++b) lr.push_back(1e-3f * static_cast<float>(b + 1));
  FusedAdam opt_visits(table_of(*visits), AdamHyper{.lr = lr});
  FusedAdam opt_single(table_of(*single), AdamHyper{.lr = lr});
  auto updater = [](Model& m, FusedAdam& opt) {
    return [&m, &opt](int64_t first, int64_t count) {
      opt.step_models(reinterpret_cast<float*>(m.param_arena().data()),
                      reinterpret_cast<const float*>(m.grad_arena().data()), first, count);
    };
  };
  Dataset data = make_synthetic(visits->sample_shape(), 10, 16 * batch, seed);
  Loader loader(data, {.batch_size = batch, .seed = seed});
  std::vector<Batch> batches;
  for (int64_t k = 0; k < K; ++k) batches.push_back(loader.make_batch());
  const int64_t steps = 2 * K + 1;
  for (int64_t done = 0; done < steps;) {
    const int64_t n = std::min(K, steps - done);
    SCOPED_TRACE("steps " + std::to_string(done) + " to " + std::to_string(done + n - 1));
    std::vector<Model::StepBatch> visit;
    std::vector<std::vector<float>> single_losses;
    for (int64_t k = 0; k < n; ++k) {
      Batch& b = batches[static_cast<size_t>(k)];
      ASSERT_TRUE(loader.next(b));
      visit.push_back({b.images(), b.labels()});
      single->train_step(b.images(), b.labels(), updater(*single, opt_single));
      single_losses.push_back(single->losses());
    }
    std::vector<int64_t> updates(static_cast<size_t>(n * c.B), 0);
    const auto update = updater(*visits, opt_visits);
    visits->train_steps(visit, [&](int64_t k, int64_t first, int64_t count) {
      for (int64_t b = first; b < first + count; ++b) ++updates[static_cast<size_t>(k * c.B + b)];
      update(first, count);
    });
    EXPECT_EQ(updates, std::vector<int64_t>(static_cast<size_t>(n * c.B), 1));
    for (int64_t k = 0; k < n; ++k)
      for (int64_t b = 0; b < c.B; ++b)
        EXPECT_EQ(visits->step_losses(k)[b], single_losses[static_cast<size_t>(k)][b])
            << "model " << b << ", step " << done + k;
    EXPECT_EQ(visits->correct(), single->correct());
    for (size_t i = 0; i < single->params().size(); ++i) {
      const TensorView g = visits->params()[i].grad, h = single->params()[i].grad;
      EXPECT_TRUE(std::equal(g.data, g.data + g.numel(), h.data)) << single->params()[i].name;
    }
    for (size_t i = 0; i < single->buffers().size(); ++i) {
      const TensorView v = visits->buffers()[i].value, w = single->buffers()[i].value;
      EXPECT_TRUE(std::equal(v.data, v.data + v.numel(), w.data)) << single->buffers()[i].name;
    }
    done += n;
  }
  EXPECT_EQ(opt_visits.steps()[0], steps);
  for (int64_t b = 0; b < c.B; ++b)
    EXPECT_EQ(visits->extract(b), single->extract(b)) << "model " << b;
}

std::string visit_name(const testing::TestParamInfo<VisitCase>& info) {
  return case_name({{info.param.model, info.param.B, info.param.plan, 2}, 0});
}

INSTANTIATE_TEST_SUITE_P(
    Plans, PlanVisits,
    testing::Values(VisitCase{"mlp", 3, "threads:1/3"}, VisitCase{"mlp", 5, "threads:2/2"},
                    VisitCase{"mlp", 4, "chunk:1/2"}, VisitCase{"lenet", 5, "threads:1/3"},
                    VisitCase{"lenet", 3, "chunk:2/2"}, VisitCase{"mlp", 3, "threads:1+fused/3"},
                    VisitCase{"lenet", 5, "threads+fused/2"},
                    // Parts of visits taken by whichever thread is free: parts of 1 and 2 steps
                    // (a visit of 3 on 2 threads), and a shorter last visit.
                    VisitCase{"mlp", 3, "threads:1+balanced/3"},
                    VisitCase{"mlp", 5, "threads:1+balanced/2"},
                    VisitCase{"lenet", 3, "threads:1+balanced/4"},
                    // Dropout (0.3 in PointNet's head) draws by the array's step: a visit's
                    // k-th step must draw the same as the k-th step taken alone.
                    VisitCase{"pointnet_cls", 3, "threads:1/3"},
                    VisitCase{"pointnet_cls", 3, "chunk:1/2"}),
    visit_name);

TEST(PlanLayout, GroupsCoverEveryModelOnce) {
  for (int64_t B : {1, 2, 3, 7, 16})
    for (int threads : {1, 2, 3})
      for (const ExecutionPlan& plan :
           {ExecutionPlan::fused(), ExecutionPlan::chunks(1), ExecutionPlan::chunks(3),
            ExecutionPlan::chunks(100), ExecutionPlan::threads(), ExecutionPlan::threads(1),
            ExecutionPlan::threads(2), ExecutionPlan::threads(0, 1, true),
            ExecutionPlan::threads(1, 1, true), ExecutionPlan::threads(2, 1, true)}) {
        const PlanLayout layout = lay_out(plan, B, threads);
        std::vector<int> seen(static_cast<size_t>(B), 0);
        for (const PlanGroup& g : layout.groups) {
          ASSERT_GE(g.count, 1);
          ASSERT_LT(g.worker, layout.workers);
          for (int64_t b = g.first; b < g.first + g.count; ++b) ++seen[static_cast<size_t>(b)];
        }
        for (int64_t b = 0; b < B; ++b)
          EXPECT_EQ(seen[static_cast<size_t>(b)], 1) << plan.str() << " B=" << B;
      }
  EXPECT_TRUE(lay_out(ExecutionPlan::chunks(8), 8, 2).is_fused());
  EXPECT_TRUE(lay_out(ExecutionPlan::threads(), 5, 1).is_fused());
  EXPECT_TRUE(lay_out(ExecutionPlan::threads(), 1, 2).is_fused());
  EXPECT_EQ(lay_out(ExecutionPlan::chunks(3), 7, 2).groups.size(), 3u);  // 3 + 3 + 1
  EXPECT_EQ(lay_out(ExecutionPlan::threads(), 7, 2).workers, 2);
  EXPECT_EQ(lay_out(ExecutionPlan::threads(2), 7, 2).groups.size(), 4u);  // 2 + 1 | 2 + 2
  EXPECT_EQ(ExecutionPlan::parse("threads:3"), ExecutionPlan::threads(3));
  EXPECT_EQ(ExecutionPlan::threads(3).str(), "threads:3");
}

// +fused: an even share per worker, the models left over in one group after the workers.
TEST(PlanLayout, RestFusedGivesEachThreadAnEvenShareAndRunsTheRestAfter) {
  auto shape = [](const PlanLayout& l) {
    std::vector<std::tuple<int64_t, int64_t, int>> out;
    for (const PlanGroup& g : l.groups) out.emplace_back(g.first, g.count, g.worker);
    return out;
  };
  using G = std::tuple<int64_t, int64_t, int>;
  constexpr int kAfter = PlanGroup::kAfterWorkers;
  EXPECT_EQ(shape(lay_out(ExecutionPlan::threads(1, 1, true), 3, 2)),
            (std::vector<G>{{0, 1, 0}, {1, 1, 1}, {2, 1, kAfter}}));
  EXPECT_EQ(shape(lay_out(ExecutionPlan::threads(0, 1, true), 5, 2)),
            (std::vector<G>{{0, 2, 0}, {2, 2, 1}, {4, 1, kAfter}}));
  EXPECT_EQ(shape(lay_out(ExecutionPlan::threads(1, 1, true), 8, 3)),
            (std::vector<G>{
                {0, 1, 0}, {1, 1, 0}, {2, 1, 1}, {3, 1, 1}, {4, 1, 2}, {5, 1, 2}, {6, 2, kAfter}}));
  // B a multiple of the threads: nothing is left over, the plan is threads:C.
  EXPECT_EQ(shape(lay_out(ExecutionPlan::threads(1, 1, true), 4, 2)),
            shape(lay_out(ExecutionPlan::threads(1), 4, 2)));
  EXPECT_EQ(shape(lay_out(ExecutionPlan::threads(1, 1, true), 3, 1)),
            shape(lay_out(ExecutionPlan::threads(1), 3, 1)));  // one thread: nothing left over
  EXPECT_EQ(lay_out(ExecutionPlan::threads(1, 4, true), 3, 2).steps_per_visit, 4);
  // The groups after the workers run after every worker's, on the calling thread.
  const PlanLayout layout = lay_out(ExecutionPlan::threads(1, 1, true), 5, 2);
  std::vector<int> order;
  std::vector<bool> inside(layout.groups.size());
  std::mutex mutex;
  run_plan_groups(layout, [&](size_t g) {
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back(static_cast<int>(g));
    inside[g] = omp_in_parallel();
  });
  ASSERT_EQ(order.size(), layout.groups.size());
  EXPECT_EQ(order.back(), static_cast<int>(layout.groups.size()) - 1);
  EXPECT_FALSE(inside.back()) << "the leftover group runs outside the workers' region";
  EXPECT_TRUE(inside.front());
}

// +balanced: a group per model, every worker running parts of any of them, each part after its
// model's part before, every part once.
TEST(PlanLayout, BalancedPartsRunEveryModelsStepsInOrderOnAnyWorker) {
  const PlanLayout layout = lay_out(ExecutionPlan::balanced_threads(4), 5, 2);
  ASSERT_TRUE(layout.balanced);
  EXPECT_EQ(layout.workers, 2);
  EXPECT_EQ(layout.parts, 2);
  EXPECT_EQ(layout.steps_per_visit, 4);
  ASSERT_EQ(layout.groups.size(), 5u);
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    EXPECT_EQ(layout.groups[g].first, static_cast<int64_t>(g));
    EXPECT_EQ(layout.groups[g].count, 1);
  }
  EXPECT_EQ(lay_out(ExecutionPlan::balanced_threads(8), 3, 4).workers, 3);  // a worker per model
  EXPECT_EQ(lay_out(ExecutionPlan::balanced_threads(8), 3, 4).parts, 3);
  for (const int64_t steps : {4, 3, 1}) {  // whole visits, a shorter one, a single step
    SCOPED_TRACE(steps);
    std::mutex mutex;
    std::vector<std::vector<int64_t>> steps_of(layout.groups.size());
    std::vector<int> parts_of_worker(2, 0);
    run_balanced_parts(layout, steps, [&](size_t g, int worker, int64_t first, int64_t end) {
      EXPECT_TRUE(omp_in_parallel());
      EXPECT_EQ(omp_get_max_threads(), 1);  // ops inside run on one thread
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + static_cast<int>(g % 2)));
      std::lock_guard<std::mutex> lock(mutex);
      ++parts_of_worker[static_cast<size_t>(worker)];
      for (int64_t k = first; k < end; ++k) steps_of[g].push_back(k);
    });
    std::vector<int64_t> all(static_cast<size_t>(steps));
    std::iota(all.begin(), all.end(), 0);
    for (const auto& s : steps_of) EXPECT_EQ(s, all);  // each step once, in order
    EXPECT_EQ(parts_of_worker[0] + parts_of_worker[1], 5 * std::min<int64_t>(steps, 2));
  }
  // A worker's exception stops the others and reaches the caller.
  std::atomic<int> started{0};
  EXPECT_THROW(run_balanced_parts(layout, 4,
                                  [&](size_t g, int, int64_t, int64_t) {
                                    ++started;
                                    if (g == 1) throw Error("part failed");
                                  }),
               Error);
  EXPECT_LT(started.load(), 10);
}

TEST(PlanParse, NamesAndErrors) {
  EXPECT_EQ(ExecutionPlan::parse("chunk:4"), ExecutionPlan::chunks(4));
  EXPECT_EQ(ExecutionPlan::parse("threads").str(), "threads");
  EXPECT_EQ(ExecutionPlan::parse("auto").kind, ExecutionPlan::Kind::kAuto);
  for (const char* bad : {"", "chunk", "chunk:", "chunk:0", "chunk:-2", "chunk:2x", "fast",
                          "threads:0", "threads:", "threads:1/0", "threads:1/", "threads:1/x",
                          "chunk:2/-1", "fused/2", "auto/2", "/2", "threads:1/2/2"})
    EXPECT_THROW(ExecutionPlan::parse(bad), Error) << bad;
  // Steps per visit: the plan's /K, said back the same way.
  EXPECT_EQ(ExecutionPlan::parse("threads:1/8"), ExecutionPlan::threads(1, 8));
  EXPECT_EQ(ExecutionPlan::parse("threads/4"), ExecutionPlan::threads(0, 4));
  EXPECT_EQ(ExecutionPlan::parse("chunk:2/3"), ExecutionPlan::chunks(2, 3));
  EXPECT_EQ(ExecutionPlan::parse("threads:1/1"), ExecutionPlan::threads(1));
  for (const char* text : {"threads:1/8", "threads/4", "chunk:2/3", "threads:3", "threads:1+fused",
                           "threads+fused/4", "threads:2+fused/8"})
    EXPECT_EQ(ExecutionPlan::parse(text).str(), text);
  EXPECT_EQ(ExecutionPlan::parse("threads:1+fused/8"), ExecutionPlan::threads(1, 8, true));
  EXPECT_EQ(ExecutionPlan::parse("threads:1+balanced/8"), ExecutionPlan::balanced_threads(8));
  EXPECT_EQ(ExecutionPlan::balanced_threads(2).str(), "threads:1+balanced/2");
  for (const char* bad : {"threads:1+balanced", "threads:1+balanced/1", "threads+balanced/4",
                          "threads:2+balanced/4", "threads:1+fused+balanced/4",
                          "chunk:1+balanced/4", "+balanced/2", "threads:1+balanced+fused/4"})
    EXPECT_THROW(ExecutionPlan::parse(bad), Error) << bad;
  EXPECT_THROW(require_one_step_per_visit(ExecutionPlan::balanced_threads(2), "DCGAN"), Error);
  for (const char* bad : {"chunk:2+fused", "fused+fused", "+fused", "threads:1/8+fused",
                          "threads+fused+fused", "threads:+fused", "auto+fused"})
    EXPECT_THROW(ExecutionPlan::parse(bad), Error) << bad;
  EXPECT_EQ(lay_out(ExecutionPlan::threads(1, 8), 4, 2).steps_per_visit, 8);
  EXPECT_EQ(lay_out(ExecutionPlan::chunks(4, 8), 4, 2).steps_per_visit, 1);  // fused: one group
  try {
    ExecutionPlan::parse("fused/2");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chunk:C or threads"), std::string::npos) << e.what();
  }
  EXPECT_THROW(require_one_step_per_visit(ExecutionPlan::threads(1, 2), "DCGAN"), Error);
  require_one_step_per_visit(ExecutionPlan::threads(1), "DCGAN");
  EXPECT_THROW(lay_out(ExecutionPlan::parse("auto"), 4, 2), Error);
}

TEST(PlanModel, ChunkedArrayKeepsActivationsForOneChunk) {
  ModelSpec spec{.B = 8, .batch_size = 32};
  auto fused = make_model("lenet", spec);
  spec.plan = ExecutionPlan::chunks(1);
  auto chunked = make_model("lenet", spec);
  // Parameters, gradients and buffers are the same; activations are an eighth.
  const size_t state = chunked->net().arena_bytes();
  EXPECT_LT(chunked->arena_bytes() - state, (fused->arena_bytes() - state) / 6);
  EXPECT_EQ(chunked->params_per_model(), fused->params_per_model());
  EXPECT_EQ(chunked->extract(5), fused->extract(5));  // same initial weights
  // A training forward and backward apart need the fused plan.
  std::vector<float> x(32 * 28 * 28, 0.5f);
  std::vector<int32_t> y(32, 1);
  const TensorView images(x.data(), {32, 1, 28, 28});
  const IndexView labels(y.data(), {32});
  EXPECT_THROW(chunked->forward(images, labels, true), Error);
  EXPECT_THROW(chunked->backward(), Error);
  chunked->forward(images, labels, false);
  chunked->train_step(images, labels);
  EXPECT_TRUE(std::isfinite(chunked->losses()[7]));
}

}  // namespace
}  // namespace hfta
