// DCGAN arrays: model b of a fused array of B generator/discriminator pairs trains exactly as the
// pair alone (same initial weights, noise, losses and parameters after a few steps), and the
// networks have PyTorch's example's structure and names.
//
// Tolerances as tests/models/test_models.cpp: losses to 2e-5 relative (plus 1e-6 absolute for
// statistics near 0), parameters to 1e-5 absolute except a 1e-4 fraction of them where a
// rounding-level gradient meets Adam's normalization, and all within 0.05 * lr.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "models/gan.h"
#include "test_util.h"

namespace hfta {
namespace {

constexpr int64_t kSteps = 3, kBatch = 4;
const std::vector<float> kLrG{2e-4f, 1e-3f, 5e-4f}, kLrD{1e-3f, 2e-4f, 4e-4f};

DcganArch small_arch() { return {.nz = 8, .ngf = 4, .ndf = 4, .nc = 1, .image = 16}; }

GanSpec spec_for(const std::vector<int64_t>& ids) {
  GanSpec s{.arch = small_arch(), .B = static_cast<int64_t>(ids.size()), .batch = kBatch};
  s.seed = 7;
  s.model_ids = ids;
  s.g_adam.lr.clear();
  s.d_adam.lr.clear();
  for (int64_t id : ids) {
    s.g_adam.lr.push_back(kLrG[static_cast<size_t>(id)]);
    s.d_adam.lr.push_back(kLrD[static_cast<size_t>(id)]);
  }
  s.g_adam.beta1 = s.d_adam.beta1 = {0.5f};
  return s;
}

std::vector<float> real_batch(int64_t step) {
  const DcganArch a = small_arch();
  std::vector<float> v(static_cast<size_t>(kBatch * a.nc * a.image * a.image));
  RngStream rng(123, static_cast<uint64_t>(step));
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

struct GanRun {
  std::vector<GanStepStats> stats;
  std::vector<std::vector<float>> g_params, d_params;  // [model][floats]
};

std::vector<std::vector<float>> per_model(const Net& net) {
  std::vector<std::vector<float>> out(static_cast<size_t>(net.B()));
  for (const Param& p : net.params())
    for (int64_t b = 0; b < net.B(); ++b) {
      const TensorView s = p.value.replica(b);
      out[static_cast<size_t>(b)].insert(out[static_cast<size_t>(b)].end(), s.data,
                                         s.data + s.numel());
    }
  return out;
}

GanRun train(const std::vector<int64_t>& ids, const ExecutionPlan& plan = ExecutionPlan::fused()) {
  const DcganArch a = small_arch();
  GanSpec spec = spec_for(ids);
  spec.plan = plan;
  spec.threads = 2;
  GanArray gan(spec);
  if (plan != ExecutionPlan::fused()) {
    EXPECT_FALSE(gan.layout().is_fused()) << plan.str() << " ran as fused";
    EXPECT_EQ(gan.spec().plan, plan);
  }
  GanRun run;
  for (int64_t t = 0; t < kSteps; ++t) {
    std::vector<float> real = real_batch(t);
    run.stats.push_back(gan.step(TensorView(real.data(), Shape{kBatch, a.nc, a.image, a.image})));
  }
  run.g_params = per_model(gan.generator());
  run.d_params = per_model(gan.discriminator());
  return run;
}

void expect_close_stats(const std::vector<float>& fused, size_t b, float alone,
                        const std::string& what) {
  const float f = fused[b];
  EXPECT_NEAR(f, alone, 2e-5f * std::fabs(alone) + 1e-6f) << what << " model " << b;
}

void expect_same_params(const std::vector<float>& fused, const std::vector<float>& alone, float lr,
                        const std::string& what) {
  ASSERT_EQ(fused.size(), alone.size()) << what;
  int64_t outliers = 0;
  double worst = 0.0;
  for (size_t i = 0; i < fused.size(); ++i) {
    const double err = std::fabs(static_cast<double>(fused[i]) - alone[i]);
    if (!(err <= 1e-5)) ++outliers;
    if (!(err <= worst)) worst = err;
  }
  EXPECT_LE(static_cast<double>(outliers), 1e-4 * static_cast<double>(fused.size()) + 1) << what;
  EXPECT_LE(worst, 0.05 * lr) << what;
}

// Model b of `array` (models 0, 1, 2) trained as model b alone: every step's statistics and the
// parameters at the end.
void expect_equals_singles(const GanRun& fused) {
  for (int64_t b = 0; b < 3; ++b) {
    const GanRun alone = train({b});
    const size_t bb = static_cast<size_t>(b);
    for (int64_t t = 0; t < kSteps; ++t) {
      const GanStepStats& f = fused.stats[static_cast<size_t>(t)];
      const GanStepStats& s = alone.stats[static_cast<size_t>(t)];
      const std::string at = fmt::format("step {}", t);
      expect_close_stats(f.loss_d, bb, s.loss_d[0], "loss_d " + at);
      expect_close_stats(f.loss_g, bb, s.loss_g[0], "loss_g " + at);
      expect_close_stats(f.d_x, bb, s.d_x[0], "d_x " + at);
      expect_close_stats(f.d_g_z1, bb, s.d_g_z1[0], "d_g_z1 " + at);
      expect_close_stats(f.d_g_z2, bb, s.d_g_z2[0], "d_g_z2 " + at);
    }
    expect_same_params(fused.g_params[bb], alone.g_params[0], kLrG[bb], "G params");
    expect_same_params(fused.d_params[bb], alone.d_params[0], kLrD[bb], "D params");
  }
}

TEST(Dcgan, ArrayEqualsSingles) { expect_equals_singles(train({0, 1, 2})); }

// Every execution plan runs the GAN step group by group on nets bound to the state (one thread's
// groups in turn, or two threads side by side) and trains each model as alone.
TEST(Dcgan, EveryPlanEqualsSingles) {
  for (const char* plan : {"chunk:1", "chunk:2", "threads", "threads:1"}) {
    SCOPED_TRACE(plan);
    expect_equals_singles(train({0, 1, 2}, ExecutionPlan::parse(plan)));
  }
}

// G's samples under a plan come from the same state as under fused.
TEST(Dcgan, SamplesUnderAPlanEqualFused) {
  GanSpec spec = spec_for({0, 1, 2});
  GanArray fused(spec);
  spec.plan = ExecutionPlan::threads();
  spec.threads = 2;
  GanArray planned(spec);
  const DcganArch a = small_arch();
  std::vector<float> real = real_batch(0);
  const TensorView batch(real.data(), Shape{kBatch, a.nc, a.image, a.image});
  fused.step(batch);
  planned.step(batch);
  const TensorView f = fused.samples(), p = planned.samples();
  ASSERT_EQ(f.shape, p.shape);
  for (int64_t i = 0; i < f.numel(); ++i) ASSERT_NEAR(f[i], p[i], 1e-5f) << "sample value " << i;
}

TEST(Dcgan, TrainingMovesTheLosses) {
  const GanRun run = train({0, 1, 2});
  for (const GanStepStats& s : run.stats)
    for (size_t b = 0; b < 3; ++b) {
      EXPECT_TRUE(std::isfinite(s.loss_d[b]) && std::isfinite(s.loss_g[b]));
      EXPECT_GT(s.d_x[b], 0.0f);
      EXPECT_LT(s.d_x[b], 1.0f);
    }
  // Initial D outputs are near 0.5: loss_d near 2 log 2.
  EXPECT_NEAR(run.stats[0].loss_d[0], 2.0f * std::log(2.0f), 0.3f);
}

TEST(Dcgan, PyTorchNamesAndShapes) {
  const DcganArch a{.nz = 100, .ngf = 64, .ndf = 64, .nc = 3, .image = 64};
  Net g(NetSpec{.B = 2, .capacity = 2});
  Value z = g.model_input({a.nz, 1, 1});
  Value img = dcgan_generator(g, z, a);
  EXPECT_EQ(g.features(img), (Shape{3, 64, 64}));
  g.add_output_grad(img);
  g.finalize();
  std::vector<std::string> names;
  for (const Param& p : g.params()) names.push_back(p.name);
  const std::vector<std::string> g_expected{
      "main.0.weight",  "main.1.weight", "main.1.bias",   "main.3.weight", "main.4.weight",
      "main.4.bias",    "main.6.weight", "main.7.weight", "main.7.bias",   "main.9.weight",
      "main.10.weight", "main.10.bias",  "main.12.weight"};
  EXPECT_EQ(names, g_expected);
  EXPECT_EQ(g.params()[0].value.shape, (Shape{2, 100, 512, 4, 4}));
  // The example's Generator: 3,576,704 parameters.
  EXPECT_EQ(g.params_per_model(), 3576704);

  Net d(NetSpec{.B = 2, .capacity = 2});
  Value x = d.input({3, 64, 64});
  d.bce_with_logits(dcgan_discriminator(d, x, a), 1.0f);
  d.finalize();
  names.clear();
  for (const Param& p : d.params()) names.push_back(p.name);
  const std::vector<std::string> d_expected{"main.0.weight", "main.2.weight", "main.3.weight",
                                            "main.3.bias",   "main.5.weight", "main.6.weight",
                                            "main.6.bias",   "main.8.weight", "main.9.weight",
                                            "main.9.bias",   "main.11.weight"};
  EXPECT_EQ(names, d_expected);
  // The example's Discriminator: 2,765,568 parameters.
  EXPECT_EQ(d.params_per_model(), 2765568);
  // BatchNorm scales N(1, 0.02), conv weights N(0, 0.02).
  const TensorView bn = d.params()[2].value;
  double mean = 0.0;
  for (int64_t i = 0; i < bn.numel(); ++i) mean += bn[i];
  EXPECT_NEAR(mean / static_cast<double>(bn.numel()), 1.0, 0.01);
}

TEST(Dcgan, RejectsUnsupportedImageSize) {
  DcganArch a = small_arch();
  a.image = 28;
  EXPECT_THROW(a.check(), Error);
}

}  // namespace
}  // namespace hfta
