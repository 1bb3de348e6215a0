#include "tasks/classifier/train_loop.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/clock.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "io/checkpoint_writer.h"
#include "io/csv.h"
#include "io/interrupt.h"
#include "io/progress.h"
#include "models/slots.h"
#include "optim/slots.h"
#include "run/plan_choice.h"
#include "tasks/classifier/classifier_plan.h"
#include "tasks/classifier/evaluate.h"
#include "tasks/classifier/results.h"
#include "tasks/classifier/resume.h"
#include "tasks/tasks.h"

namespace hfta {

ModelSpec ModelConfig::spec(const std::vector<int64_t>& ids, int64_t batch_size,
                            uint64_t seed) const {
  std::vector<int64_t> streams = ids;
  for (int64_t& id : streams) {
    if (model_streams.empty()) {
      id += first_model_id;
      continue;
    }
    HFTA_CHECK(id >= 0 && id < static_cast<int64_t>(model_streams.size()),
               "model {} has no RNG stream: {} streams given", id, model_streams.size());
    id = model_streams[static_cast<size_t>(id)];
  }
  return {.B = static_cast<int64_t>(ids.size()),
          .batch_size = batch_size,
          .seed = seed,
          .model_ids = streams,
          .sample_shape = sample_shape,
          .num_classes = num_classes,
          .dropout = dropout,
          .plan = plan,
          .device = device};
}

ModelConfig model_config(const std::string& name, const Data& data, std::optional<float> dropout,
                         bool no_decay_norm_bias) {
  return {.name = model_info(name).name,
          .sample_shape = data.train.sample_shape,
          .num_classes = data.train.num_classes,
          .dropout = dropout,
          .no_decay_norm_bias = no_decay_norm_bias};
}

Device checked_device(const std::string& name, const std::string& model, const std::string& plan) {
  const Device device = parse_device(name);
  if (device == Device::kCpu) return device;
  if (!model_info(model).runs_on_cuda) {
    std::vector<std::string> ready;
    for (const std::string& m : model_names())
      if (model_info(m).runs_on_cuda) ready.push_back(m);
    fail(
        "--device {}: --model {} has ops without a CUDA kernel yet (docs/cuda.md); on the GPU "
        "run {}",
        name, model, fmt::join(ready, ", "));
  }
  return checked_device(name, plan);
}

ModelArray make_array(const ModelConfig& config, const std::vector<int64_t>& ids,
                      int64_t batch_size, uint64_t seed, std::string_view optimizer,
                      const HyperValues& all_values) {
  ModelArray a;
  a.ids = ids;
  ModelConfig resolved = config;
  auto log = [](const std::string& line) { fmt::print(stderr, "{}\n", line); };
  if (config.device != Device::kCpu && config.plan.kind == ExecutionPlan::Kind::kAuto) {
    // The other plans split the models over CPU threads; a device runs them in one call per op.
    resolved.plan = ExecutionPlan::fused();
    log("plan auto on a CUDA device: fused (the one plan a device array runs)");
  } else {
    resolved.plan = resolve_plan(config.plan, config, ids, batch_size, seed, optimizer,
                                 config.plan_memory_budget, log)
                        .plan;
  }
  a.model = make_model(config.name, resolved.spec(ids, batch_size, seed));
  a.optimizer =
      make_optimizer(optimizer, *a.model, pick_models(all_values, ids), config.no_decay_norm_bias);
  return a;
}

std::span<const StepReport> array_steps(ModelArray& array,
                                        std::span<const Model::StepBatch> steps) {
  Model& model = *array.model;
  Optimizer& optimizer = *array.optimizer;
  float* params = reinterpret_cast<float*>(model.param_arena().data());
  const float* grads = reinterpret_cast<const float*>(model.grad_arena().data());
  const size_t n = steps.size();
  if (array.reports.size() < n)
    array.reports.resize(
        n, StepReport{.skipped = std::vector<uint8_t>(static_cast<size_t>(model.B()), uint8_t{0})});
  const bool fused = model.layout().is_fused();
  model.train_steps(steps, [&](int64_t k, int64_t first, int64_t count) {
    StepReport& report = array.reports[static_cast<size_t>(k)];
    if (fused) {
      report = optimizer.step(params, grads);  // same size: copies without allocating
      return;
    }
    optimizer.step_models(params, grads, first, count);
    for (int64_t b = first; b < first + count; ++b)
      report.skipped[static_cast<size_t>(b)] = optimizer.skipped_last_step(b) ? 1 : 0;
  });
  if (!fused) {
    optimizer.finish_model_steps();
    for (size_t k = 0; k < n; ++k)
      array.reports[k].num_skipped =
          std::count(array.reports[k].skipped.begin(), array.reports[k].skipped.end(), 1);
  }
  return std::span<const StepReport>(array.reports).first(n);
}

const StepReport& array_step(ModelArray& array, const TensorView& images, const IndexView& labels) {
  const Model::StepBatch step{images, labels};
  return array_steps(array, {&step, 1}).front();
}

int64_t train_steps(ModelArray& array, Loader& loader, Batch& batch, int64_t max_steps,
                    const std::function<void(const TrainedStep&)>& after_step) {
  const int64_t per_visit = array.model->layout().steps_per_visit;
  // The visit's batches: the caller's, then per_visit - 1 more (once per call: an epoch).
  std::vector<Batch> more;
  for (int64_t k = 1; k < per_visit; ++k) more.push_back(loader.make_batch());
  auto batch_at = [&](int64_t k) -> Batch& {
    return k == 0 ? batch : more[static_cast<size_t>(k - 1)];
  };
  std::vector<Model::StepBatch> visit;
  int64_t steps = 0;
  const bool whole_epoch = max_steps == kUntilEpochEnds;
  bool epoch_ended = false;
  while (!epoch_ended && (whole_epoch || steps < max_steps)) {
    visit.clear();
    while (static_cast<int64_t>(visit.size()) < per_visit &&
           (whole_epoch || steps + static_cast<int64_t>(visit.size()) < max_steps)) {
      Batch& b = batch_at(static_cast<int64_t>(visit.size()));
      if (!loader.next(b)) {  // the epoch ended
        if (whole_epoch || !loader.next(b)) {
          epoch_ended = true;
          break;
        }
      }
      visit.push_back({b.images(), b.labels()});
    }
    if (visit.empty()) break;
    const std::span<const StepReport> reports = array_steps(array, visit);
    const int64_t n = static_cast<int64_t>(visit.size());
    steps += n;
    if (!after_step) continue;
    for (int64_t k = 0; k < n; ++k)
      after_step({.report = reports[static_cast<size_t>(k)],
                  .losses = array.model->step_losses(k),
                  .arrays_current = k == n - 1});
  }
  return steps;
}

namespace {

// A classifier array of a `hfta train` run: the loader's epochs, a metrics row per model and
// step, the test evaluation after every epoch.
class ClassifierRun final : public RunArray {
 public:
  // Holds copies of `o` and `config`: a search's live array outlives the options it was made of.
  ClassifierRun(const TrainOptions& o, const ModelConfig& config, const HyperValues& all_values,
                const std::vector<int64_t>& ids, const Data& data, CsvWriter& metrics)
      : o_(o),
        config_(config),
        values_(pick_models(all_values, ids)),
        ids_(ids),
        data_(data),
        metrics_(metrics),
        array_(make_array(config, ids, o.batch_size, o.seed, o.optimizer, all_values)),
        loader_(data.train, {.batch_size = o.batch_size,
                             .shuffle = true,
                             .seed = o.seed,
                             .drop_last = true,
                             .iters_per_epoch = o.iters_per_epoch}),
        batch_(loader_.make_batch()),
        who_(array_name(o, ids)) {}

  const Model& model() const { return *array_.model; }

  int64_t models() const override { return static_cast<int64_t>(ids_.size()); }
  int64_t steps_per_epoch() const override { return loader_.batches_per_epoch(); }

  void begin_epoch(int64_t epoch, int64_t done) override {
    epoch_ = epoch;
    loader_.start_epoch(o_.first_epoch + epoch);
    for (int64_t k = 0; k < done && loader_.next(batch_); ++k) {
    }
  }

  void train_epoch(const std::function<void(const TrainedStepView&)>& after_step) override {
    train_steps(array_, loader_, batch_, kUntilEpochEnds, [&](const TrainedStep& step) {
      after_step({.losses = step.losses,
                  .skipped = step.report.any_skipped()
                                 ? std::span<const uint8_t>(step.report.skipped)
                                 : std::span<const uint8_t>(),
                  .current = step.arrays_current,
                  .write_rows = [&](int64_t global_step) {
                    for (size_t b = 0; b < ids_.size(); ++b)
                      metrics_.row(metrics_row(ids_[b], global_step, epoch_ + 1,
                                               array_.optimizer->lr()[b], step.losses[b]));
                  }});
    });
  }

  void end_epoch(int64_t epoch, const ArrayProgress& p, int64_t steps, double seconds) override {
    eval_ = evaluate(*array_.model, data_.test, &data_.parts);
    const double samples_per_s =
        static_cast<double>(models() * steps * o_.batch_size) / std::max(seconds, 1e-9);
    fmt::print("epoch {}/{} ({}): {:.1f} s, {:.0f} samples/s over all models\n", epoch + 1,
               o_.epochs, who_, seconds, samples_per_s);
    for (size_t b = 0; b < ids_.size(); ++b)
      fmt::print(
          "  model {:>2}  lr {:<8g} train loss {:.4f}  test loss {:.4f}  test acc {:.2f}%{}{}\n",
          ids_[b], values_.at("lr")[b], p.last_train_loss[b], eval_.loss[b],
          100.0 * eval_.accuracy[b],
          eval_.miou.empty() ? "" : fmt::format(" of points  mIoU {:.4f}", eval_.miou[b]),
          p.skipped[b] ? fmt::format("  ({} steps skipped: NaN/Inf gradients)", p.skipped[b]) : "");
  }

  void finish(const ArrayProgress& p, bool trained, double wall,
              std::vector<ModelResult>& results) override {
    if (!trained) eval_ = evaluate(*array_.model, data_.test, &data_.parts);
    for (size_t b = 0; b < ids_.size(); ++b) {
      ModelResult& r = results[static_cast<size_t>(ids_[b])];
      r.model = ids_[b];
      r.final_train_loss = p.last_train_loss[b];
      r.test_loss = eval_.loss[b];
      r.test_accuracy = eval_.accuracy[b];
      if (!eval_.miou.empty()) r.test_miou = eval_.miou[b];
      r.skipped_steps = p.skipped[b];
      r.wall_seconds = wall;
      r.state_crc32 = p.state_crc32.at(b);
    }
  }

  void fill_checkpoint(Checkpoint& c, const ArrayProgress& p) override {
    hfta::fill_checkpoint(c, o_, config_, values_, p, array_);
  }
  void reserve_checkpoint(Checkpoint& c) override {
    // On the writer thread: shapes only, never the training's values.
    capture_tensors(*array_.model, array_.optimizer.get(), c.tensors, /*values=*/false);
  }
  ArrayProgress restore(const Checkpoint& c) override { return restore_checkpoint(c, array_); }

  ValidationScores validate() override {
    const Evaluation e = evaluate(*array_.model, data_.test, &data_.parts);
    return {.accuracy = e.accuracy, .loss = e.loss};
  }

  bool keep_models(std::span<const int64_t> keep) override {
    array_.model = compact(*array_.model, keep);
    array_.optimizer = compact_optimizer(*array_.optimizer, array_.model->net(), keep);
    array_.reports.clear();
    values_ = pick_models(values_, std::vector<int64_t>(keep.begin(), keep.end()));
    ids_.resize(keep.size());
    std::iota(ids_.begin(), ids_.end(), 0);
    array_.ids = ids_;
    return true;
  }

  bool refill_model(int64_t slot, const TrainOptions& one) override {
    const HyperValues h = resolve_hyper(one.optimizer, one.hyper, 1);
    std::map<std::string, float> named;
    for (const auto& [name, v] : h) named[name] = v.at(0);
    // The optimizer checks the values before anything changes.
    array_.optimizer->reset_slot(slot, SlotHyper::from_named(named));
    array_.model->reinit_slot(slot, one.first_model_id);
    for (auto& [name, v] : values_) v.at(static_cast<size_t>(slot)) = h.at(name).at(0);
    return true;
  }

 private:
  TrainOptions o_;
  ModelConfig config_;
  HyperValues values_;
  std::vector<int64_t> ids_;
  const Data& data_;
  CsvWriter& metrics_;
  ModelArray array_;
  Loader loader_;
  Batch batch_;
  std::string who_;
  int64_t epoch_ = 0;
  Evaluation eval_;
};

}  // namespace

std::unique_ptr<RunArray> make_classifier_run(const TrainOptions& o, const ModelConfig& config,
                                              const HyperValues& all_values,
                                              const std::vector<int64_t>& ids, const Data& data,
                                              CsvWriter& metrics) {
  auto run = std::make_unique<ClassifierRun>(o, config, all_values, ids, data, metrics);
  if (ids.front() == 0)
    fmt::print(
        "{}: {} parameters per model; {:.1f} MiB of parameters, gradients, buffers and "
        "activations per model at batch {}\n",
        config.name, run->model().params_per_model(),
        static_cast<double>(run->model().arena_bytes()) / static_cast<double>(ids.size()) /
            (1 << 20),
        o.batch_size);
  return run;
}

namespace {

class ClassifierSearchData final : public SearchData {
 public:
  ClassifierSearchData(const TrainOptions& o, int64_t largest_batch)
      : device_(checked_device(o.device, o.model, o.plan)) {  // before any data is read
    const ModelInfo& info = model_info(o.model);
    Shape sample_shape = info.default_sample_shape;
    if (o.npoints > 0 && sample_shape.rank() == 2) sample_shape[0] = o.npoints;  // [L, 3] clouds
    data_ = load_data(o.dataset, o.data_dir, sample_shape, info.default_num_classes,
                      o.synthetic_train_size, o.synthetic_test_size, o.seed,
                      info.task == ModelTask::kSegment);
    dataset_ = o.dataset;
    HFTA_CHECK(largest_batch <= data_.train.size,
               "batch size {} (--batch-size or the space's batch_size) exceeds the {} training "
               "samples of {}",
               largest_batch, data_.train.size, o.dataset);
  }

  std::unique_ptr<RunArray> make_array(const TrainOptions& o) override {
    ModelConfig config = array_config(o);
    config.plan = ExecutionPlan::parse(o.plan);
    config.plan_memory_budget = o.memory_budget_bytes;
    config.model_streams = o.model_streams;
    config.device = device_;
    const int64_t B = array_size(o.hyper);
    std::vector<int64_t> ids(static_cast<size_t>(B));
    std::iota(ids.begin(), ids.end(), 0);
    return std::make_unique<ClassifierRun>(o, config, resolve_hyper(o.optimizer, o.hyper, B), ids,
                                           data_, metrics_);
  }

  int64_t bytes_per_model(const TrainOptions& o) override {
    // Arenas grow linearly in B, and every plan runs one model the same way.
    const ModelConfig config = array_config(o);
    return static_cast<int64_t>(
        make_model(config.name, config.spec({0}, o.batch_size, o.seed))->arena_bytes());
  }

  std::string describe() const override {
    return fmt::format("{} ({} train samples)", dataset_, data_.train.size);
  }

 private:
  ModelConfig array_config(const TrainOptions& o) const {
    return model_config(o.model, data_, o.dropout, o.no_decay_norm_bias);
  }

  Device device_;
  Data data_;
  std::string dataset_;
  CsvWriter metrics_{"", metrics_columns()};  // a search keeps no per-step rows
};

}  // namespace

std::unique_ptr<SearchData> load_classifier_search_data(const TrainOptions& options,
                                                        int64_t largest_batch) {
  return std::make_unique<ClassifierSearchData>(options, largest_batch);
}

}  // namespace hfta
