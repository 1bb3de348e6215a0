#include "tasks/gan/train_gan.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "core/rng.h"
#include "datasets/fashion_mnist.h"
#include "datasets/loader.h"
#include "io/checkpoint_writer.h"
#include "io/csv.h"
#include "io/interrupt.h"
#include "io/png.h"
#include "models/gan.h"
#include "run/data.h"
#include "run/epoch_loop.h"
#include "run/hyper.h"
#include "run/plan_choice.h"
#include "run/train_run.h"
#include "run/trial_loop.h"
#include "tasks/classifier/resume.h"
#include "tasks/gan/gan_checkpoint.h"
#include "tasks/tasks.h"

namespace hfta {

namespace {

constexpr int64_t kDefaultImage = 64;  // the example's --imageSize

int64_t image_side(int64_t image_size) {
  const int64_t side = image_size > 0 ? image_size : kDefaultImage;
  HFTA_CHECK(side == 8 || side == 16 || side == 32 || side == 64,
             "--image-size {} cannot be drawn by the DCGAN generator (each layer doubles the "
             "side from 4): give 8, 16, 32 or 64",
             side);
  return side;
}

}  // namespace

Dataset gan_dataset(const std::string& dataset, const std::string& data_dir, int64_t side,
                    int64_t synthetic_size, uint64_t seed, Split split) {
  if (dataset == "synthetic") {
    Data d = load_data("synthetic", "", Shape{3, side, side}, 1, synthetic_size,
                       std::max<int64_t>(2, synthetic_size / 4), seed);
    return split == Split::kTrain ? d.train : d.test;
  }
  HFTA_CHECK(dataset == "fashion-mnist",
             "--model dcgan trains on --dataset fashion-mnist or synthetic, not {}", dataset);
  Dataset d = load_fashion_mnist(data_dir.empty() ? kFashionMnistDefaultDir : data_dir, split);
  // Undo the classifier normalization: pixels p in [0, 1], then 2p - 1 (the example's
  // Normalize(0.5, 0.5)).
  for (float& x : d.images) x = 2.0f * (x * kFashionMnistStd + kFashionMnistMean) - 1.0f;
  return resize_images(d, side);
}

namespace {

void check_enough_images(const Dataset& data, const std::string& dataset,
                         const std::string& data_dir, int64_t batch) {
  HFTA_CHECK(data.size >= batch,
             "--dataset {}{} has {} training images, fewer than --batch-size {}: every step "
             "takes a full batch; lower --batch-size{}",
             dataset, data_dir.empty() ? "" : fmt::format(" ({})", data_dir), data.size, batch,
             dataset == "synthetic" ? " or raise --synthetic-size" : "");
}

// lr, lr_d, beta1, beta2: B values each.
HyperValues gan_hyper(const TrainOptions& o) {
  for (const auto& [name, values] : o.hyper) {
    std::string flag = "--" + name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    HFTA_CHECK(name == "lr" || name == "beta1" || name == "beta2",
               "--model dcgan reads --lr, --lr-d, --beta1 and --beta2 only, not {}", flag);
  }
  int64_t B = array_size(o.hyper);
  if (static_cast<int64_t>(o.lr_d.size()) > 1) {
    HFTA_CHECK(B == 1 || static_cast<int64_t>(o.lr_d.size()) == B,
               "--lr-d has {} values but the other lists imply {} models: give one value "
               "(shared) or one per model",
               o.lr_d.size(), B);
    B = static_cast<int64_t>(o.lr_d.size());
  }
  auto list = [&](const std::string& name, float fallback) {
    auto it = o.hyper.find(name);
    if (it == o.hyper.end()) return std::vector<float>(static_cast<size_t>(B), fallback);
    return expand_per_model(it->second, B, "--" + name);
  };
  HyperValues h;
  h["lr"] = list("lr", 2e-4f);
  h["lr_d"] = o.lr_d.empty() ? h["lr"] : expand_per_model(o.lr_d, B, "--lr-d");
  h["beta1"] = list("beta1", 0.5f);
  h["beta2"] = list("beta2", 0.999f);
  AdamHyper check{.lr = h["lr"], .beta1 = h["beta1"], .beta2 = h["beta2"]};
  check.check();
  check.lr = h["lr_d"];
  check.check();
  return h;
}

GanSpec gan_spec(const HyperValues& all, const std::vector<int64_t>& ids, int64_t nc, int64_t side,
                 int64_t batch, uint64_t seed, Device device) {
  GanSpec spec{.arch = {.nc = nc, .image = side},
               .B = static_cast<int64_t>(ids.size()),
               .batch = batch,
               .seed = seed,
               .model_ids = ids,
               .device = device};
  const HyperValues h = pick_models(all, ids);
  spec.g_adam.lr = h.at("lr");
  spec.g_adam.beta1 = h.at("beta1");
  spec.g_adam.beta2 = h.at("beta2");
  spec.d_adam = spec.g_adam;
  spec.d_adam.lr = h.at("lr_d");
  return spec;
}

// The spec with `asked` resolved for its array: auto times a few GAN steps of every candidate
// plan on random real images (cached per machine and configuration, as a classifier's).
GanSpec with_plan(GanSpec spec, const std::string& asked, int64_t memory_budget_bytes) {
  spec.plan = ExecutionPlan::parse(asked);
  if (spec.device != Device::kCpu) {
    // The other plans split the models over CPU threads; a device runs them in one call per op.
    if (spec.plan.kind == ExecutionPlan::Kind::kAuto)
      fmt::print(stderr, "plan auto on a CUDA device: fused (the one plan a device array runs)\n");
    spec.plan = ExecutionPlan::fused();
    return spec;
  }
  const DcganArch& a = spec.arch;
  std::vector<float> images;
  TensorView real;
  PlanTrialBuilder build = [&](const ExecutionPlan& plan) {
    if (images.empty()) {  // made at the first build: a cached choice needs none
      RngStream rng(spec.seed, kPlanTimingInputs);
      images.resize(static_cast<size_t>(spec.batch * a.nc * a.image * a.image));
      for (float& v : images) v = rng.uniform(-1.0f, 1.0f);
      real = TensorView(images.data(), Shape{spec.batch, a.nc, a.image, a.image});
    }
    GanSpec s = spec;
    s.plan = plan;
    auto gan = std::make_shared<GanArray>(s);
    return PlanTrialRun{.arena_bytes = static_cast<double>(gan->arena_bytes()),
                        .step = [gan, &real] { gan->step(real); }};
  };
  const std::string configuration =
      fmt::format("dcgan nz {} ngf {} ndf {} nc {} image {} | B {} | batch {} | adam", a.nz, a.ngf,
                  a.ndf, a.nc, a.image, spec.B, spec.batch);
  spec.plan = resolve_plan(spec.plan, spec.B, configuration, "dcgan", build, memory_budget_bytes,
                           [](const std::string& line) { fmt::print(stderr, "{}\n", line); })
                  .plan;
  return spec;
}

std::string grid_path(const std::string& out, int64_t model, int64_t epoch) {
  return fmt::format("{}/samples/model{}_epoch{}.png", out, model, epoch);
}

// Model k of the array's samples for its fixed noise as one PNG grid per model.
void write_grids(GanArray& gan, const std::string& out, int64_t epoch) {
  const TensorView grid = gan.samples();  // [64, B*nc, S, S]
  const DcganArch& a = gan.spec().arch;
  const int64_t rows = grid.shape[0], per = a.nc * a.image * a.image, B = gan.B();
  std::vector<float> one(static_cast<size_t>(rows * per));
  for (int64_t k = 0; k < B; ++k) {
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(grid.data + (r * B + k) * per, per, one.data() + r * per);
    write_png_grid(grid_path(out, gan.spec().model_ids[static_cast<size_t>(k)], epoch),
                   TensorView(one.data(), Shape{rows, a.nc, a.image, a.image}));
  }
}

// A DCGAN array of a `hfta train` run: the loader's epochs, a metrics row per model and step
// (the example's statistics), each model's sample grid after every epoch.
class GanRun final : public RunArray {
 public:
  GanRun(const TrainOptions& o, const GanSpec& spec, const HyperValues& all_hyper,
         const Dataset& data, CsvWriter& metrics)
      : o_(o),
        ids_(spec.model_ids),
        hyper_(pick_models(all_hyper, ids_)),
        gan_(spec),
        loader_(data,
                {.batch_size = o.batch_size, .seed = o.seed, .iters_per_epoch = o.iters_per_epoch}),
        batch_(loader_.make_batch()),
        metrics_(metrics) {}

  int64_t models() const override { return static_cast<int64_t>(ids_.size()); }
  int64_t steps_per_epoch() const override { return loader_.batches_per_epoch(); }

  void begin_epoch(int64_t epoch, int64_t done) override {
    epoch_ = epoch;
    epoch_steps_ = 0;
    loader_.start_epoch(epoch);
    while (epoch_steps_ < done && loader_.next(batch_)) ++epoch_steps_;
  }

  void train_epoch(const std::function<void(const TrainedStepView&)>& after_step) override {
    while (loader_.next(batch_)) {
      const GanStepStats s = gan_.step(batch_.images());
      ++epoch_steps_;
      after_step(
          {.losses = s.loss_g, .write_rows = [&](int64_t step) {
             for (size_t k = 0; k < ids_.size(); ++k)
               metrics_.row({std::to_string(ids_[k]), std::to_string(epoch_), std::to_string(step),
                             fmt::format("{:.6g}", s.loss_d[k]), fmt::format("{:.6g}", s.loss_g[k]),
                             fmt::format("{:.6g}", s.d_x[k]), fmt::format("{:.6g}", s.d_g_z1[k]),
                             fmt::format("{:.6g}", s.d_g_z2[k])});
             if (step % 50 == 0 || epoch_steps_ == 1) {
               fmt::print("epoch {} step {} ({}): loss_d {:.4f} loss_g {:.4f} (model {})\n", epoch_,
                          step, array_name(o_, ids_), s.loss_d[0], s.loss_g[0], ids_[0]);
               std::fflush(stdout);
             }
           }});
    }
  }

  void end_epoch(int64_t epoch, const ArrayProgress&, int64_t, double) override {
    write_grids(gan_, o_.out, epoch);  // G in training mode: its BatchNorm statistics move
  }

  void finish(const ArrayProgress& p, bool, double wall,
              std::vector<ModelResult>& results) override {
    for (size_t k = 0; k < ids_.size(); ++k) {
      ModelResult& r = results[static_cast<size_t>(ids_[k])];
      r.model = ids_[k];
      r.final_train_loss = p.last_train_loss[k];
      r.wall_seconds = wall;
      r.state_crc32 = p.state_crc32.at(k);
    }
  }

  void fill_checkpoint(Checkpoint& c, const ArrayProgress& p) override {
    fill_gan_checkpoint(c, gan_, hyper_, p, o_.batch_size);
    c.plan = gan_.spec().plan.str();
    c.dataset = o_.dataset;
    c.data_dir = o_.data_dir;
  }
  ArrayProgress restore(const Checkpoint& c) override { return restore_gan_checkpoint(c, gan_); }

 private:
  const TrainOptions& o_;
  std::vector<int64_t> ids_;
  HyperValues hyper_;
  GanArray gan_;
  Loader loader_;
  Batch batch_;
  CsvWriter& metrics_;
  int64_t epoch_ = 0, epoch_steps_ = 0;
};

// <out>/summary.csv from each model's last metrics row (so a resumed run reports the same) and
// the end-of-run table.
void write_gan_summary(const TrainOptions& o, const HyperValues& h,
                       const std::vector<ModelResult>& results) {
  const CsvTable m = read_csv(o.out + "/metrics.csv");
  const size_t model_col = m.column("model");
  std::map<int64_t, size_t> last;
  for (size_t r = 0; r < m.rows.size(); ++r) last[m.integer(r, model_col)] = r;
  CsvWriter summary(
      o.out + "/summary.csv",
      {"model", "lr", "lr_d", "beta1", "beta2", "steps", "loss_d", "loss_g", "d_x", "d_g_z1",
       "d_g_z2", "mean_loss_g_last_epoch", "samples", "wall_seconds", "state_crc32"});
  fmt::print("{:>5}  {:<9} {:<9} {:>6} {:>8} {:>8} {:>6} {:>13}  {}\n", "model", "lr", "lr_d",
             "steps", "loss_d", "loss_g", "D(x)", "D(G(z))", "last samples");
  for (const ModelResult& res : results) {
    const size_t b = static_cast<size_t>(res.model);
    auto it = last.find(res.model);
    HFTA_CHECK(it != last.end(), "{}/metrics.csv has no row of model {}", o.out, res.model);
    const std::vector<std::string>& row = m.rows[it->second];
    auto field = [&](const char* name) { return row[m.column(name)]; };
    const std::string grid = grid_path(o.out, res.model, o.epochs - 1);
    summary.row({std::to_string(res.model), fmt::format("{:g}", h.at("lr")[b]),
                 fmt::format("{:g}", h.at("lr_d")[b]), fmt::format("{:g}", h.at("beta1")[b]),
                 fmt::format("{:g}", h.at("beta2")[b]), field("step"), field("loss_d"),
                 field("loss_g"), field("d_x"), field("d_g_z1"), field("d_g_z2"),
                 fmt::format("{:.6g}", res.final_train_loss), grid,
                 fmt::format("{:.3f}", res.wall_seconds), res.state_crc32_text()});
    fmt::print("{:>5}  {:<9g} {:<9g} {:>6} {:>8} {:>8} {:>6} {:>6}/{:<6}  {}\n", res.model,
               h.at("lr")[b], h.at("lr_d")[b], field("step"), field("loss_d"), field("loss_g"),
               field("d_x"), field("d_g_z1"), field("d_g_z2"), grid);
  }
}

}  // namespace

TrainResult run_train_gan(const TrainOptions& o, int64_t stop_after_step) {
  const auto start = Clock::now();
  HFTA_CHECK(o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
  HFTA_CHECK(o.batch_size >= 2, "--batch-size must be at least 2 for a GAN, got {}", o.batch_size);
  HFTA_CHECK(o.iters_per_epoch >= 0, "--iters-per-epoch must be >= 0, got {}", o.iters_per_epoch);
  HFTA_CHECK(o.optimizer == "adam", "--model dcgan trains with Adam (the example's), not {}",
             o.optimizer);
  // A plan the DCGAN cannot run, or a device it cannot run on, fails before the data loads.
  require_one_step_per_visit(ExecutionPlan::parse(o.plan), "DCGAN");
  const Device device = checked_device(o.device, o.plan);
  prepare_runtime(o.threads, o.deterministic);
  const HyperValues h = gan_hyper(o);
  const int64_t B = static_cast<int64_t>(h.at("lr").size());
  const int64_t side = image_side(o.image_size);

  const Dataset data = gan_dataset(o.dataset, o.data_dir, side, o.synthetic_train_size, o.seed);
  check_enough_images(data, o.dataset, o.data_dir, o.batch_size);
  const int64_t nc = data.sample_shape[0];
  std::error_code ec;
  std::filesystem::create_directories(o.out + "/samples", ec);
  HFTA_CHECK(!ec, "cannot create {}/samples: {}", o.out, ec.message());

  // One plan for every array (serial arrays of one model are fused): the first array's.
  std::string plan = with_plan(gan_spec(h, array_groups(B, o.serial).front(), nc, side,
                                        o.batch_size, o.seed, device),
                               o.plan, o.memory_budget_bytes)
                         .plan.str();

  TrainResult result = train_arrays(
      o,
      {.B = B,
       .metrics_columns = {"model", "epoch", "step", "loss_d", "loss_g", "d_x", "d_g_z1", "d_g_z2"},
       .check_resumable =
           [&](const Checkpoint& c, const std::string& path, const std::vector<int64_t>& ids) {
             check_gan_resumable(c, gan_spec(h, ids, nc, side, o.batch_size, o.seed, device),
                                 pick_models(h, ids), o.epochs, path);
             // The plan the checkpoint's array ran, rather than the one timed now.
             if (o.plan == "auto" && !c.plan.empty()) plan = c.plan;
           },
       .make_array =
           [&](const std::vector<int64_t>& ids, CsvWriter& metrics) {
             return std::make_unique<GanRun>(
                 o, with_plan(gan_spec(h, ids, nc, side, o.batch_size, o.seed, device), plan, 0), h,
                 data, metrics);
           },
       .announce =
           [&] {
             fmt::print("{}\n", cpu::describe_runtime());
             if (device != Device::kCpu) fmt::print("{}\n", describe_device(device));
             fmt::print(
                 "training {} DCGAN{} ({}) on {}: {} images of {}, batch {}, {} epoch{}{}\n", B,
                 B == 1 ? "" : "s", o.serial ? "serial" : fmt::format("fused, plan {}", plan),
                 o.dataset, data.size, data.sample_shape.str(), o.batch_size, o.epochs,
                 o.epochs == 1 ? "" : "s",
                 o.iters_per_epoch ? fmt::format(", at most {} steps per epoch", o.iters_per_epoch)
                                   : "");
             std::fflush(stdout);
           },
       .stop_after_step = stop_after_step});
  result.wall_seconds = seconds_since(start);
  write_gan_summary(o, h, result.models);
  fmt::print("done in {:.1f} s: {}/summary.csv, {}/metrics.csv and {}/samples/\n",
             result.wall_seconds, o.out, o.out, o.out);
  return result;
}

namespace {

class GanTrialArray final : public TrialArray {
 public:
  GanTrialArray(GanSpec spec, const Dataset& data, int64_t batch_size, uint64_t seed)
      : gan_(std::move(spec)),
        loader_(data, {.batch_size = batch_size, .seed = seed}),
        batch_(loader_.make_batch()),
        batch_size_(batch_size) {}

  double steps(int64_t n) override {
    for (int64_t s = 0; s < n; ++s) {
      if (!loader_.next(batch_)) loader_.next(batch_);  // an epoch ended: go on into the next
      gan_.step(batch_.images());
    }
    synchronize(gan_.spec().device);  // the timed steps end when the device is done
    return static_cast<double>(n * batch_size_);
  }
  void reset_profile() override { gan_.reset_profile(); }
  void print_profile(double) const override {
    if (gan_.profiling()) fmt::print(stderr, "{}\n", gan_.profile_report());
  }
  int64_t params_per_model() const override {
    return gan_.generator().params_per_model() + gan_.discriminator().params_per_model();
  }
  std::string plan() const override { return gan_.spec().plan.str(); }
  double flops_per_step() const override {
    return static_cast<double>(gan_.B() * batch_size_) * gan_.train_flops_per_row();
  }

 private:
  GanArray gan_;
  Loader loader_;
  Batch batch_;
  int64_t batch_size_;
};

}  // namespace

TrialResult run_gan_trial(const TrialOptions& o) {
  check_trial_options(o, 2, "a GAN's rows");
  const Device device = checked_device(o.device, o.plan);
  prepare_runtime(o.threads, o.deterministic);
  const int64_t side = image_side(o.image_size);

  // Learning rates log-uniform in [1e-4, 1e-2] per model, as the classifiers' trials; D's equal
  // G's.
  HyperValues h;
  h["lr"] = trial_learning_rates(o, -4.0f, -2.0f);
  h["lr_d"] = h["lr"];
  h["beta1"].assign(static_cast<size_t>(o.B), 0.5f);
  h["beta2"].assign(static_cast<size_t>(o.B), 0.999f);
  // Enough images for a few distinct batches; real data is the full training split.
  const Dataset data = gan_dataset(o.dataset, o.data_dir, side, 8 * o.batch_size, o.seed);
  check_enough_images(data, o.dataset, o.data_dir, o.batch_size);
  return run_timed_trial(o, [&](const std::vector<int64_t>& ids) {
    return std::make_unique<GanTrialArray>(
        with_plan(gan_spec(h, ids, data.sample_shape[0], side, o.batch_size, o.seed, device),
                  o.plan,
                  /*memory_budget_bytes=*/0),
        data, o.batch_size, o.seed);
  });
}

}  // namespace hfta
