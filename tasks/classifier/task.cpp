// The classifier task: what `hfta eval` and `hfta export` do with a classifier's checkpoint, and
// which flags and metric it has.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "io/checkpoint.h"
#include "models/model.h"
#include "run/data.h"
#include "run/export.h"
#include "run/plan_choice.h"
#include "tasks/classifier/classifier.h"
#include "tasks/classifier/evaluate.h"
#include "tasks/classifier/train_loop.h"
#include "tasks/tasks.h"

namespace hfta {

namespace {

bool has_feature_transform(const std::string& model) {
  try {
    feature_transform_variant(model);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::map<std::string, std::string> export_metadata(const Model& model, const std::string& source) {
  return {{"format", "pt"},
          {"hfta_model", model.name()},
          {"sample_shape", model.sample_shape().str()},
          {"num_classes", std::to_string(model.num_classes())},
          {"source", source}};
}

std::string write_export(const Model& model, const std::string& out, const std::string& source) {
  write_safetensors(out, state_dict(model, 0), export_metadata(model, source));
  return fmt::format(
      "{} ({}; samples {}, {} classes) written to {}: {} parameter and {} buffer "
      "values",
      model.name(), source, model.sample_shape().str(), model.num_classes(), out,
      model.params_per_model(), model.net().buffers_per_model());
}

class ClassifierTask final : public Task {
 public:
  std::string_view kind() const override { return "classifier"; }
  std::vector<std::string> model_names() const override { return hfta::model_names(); }

  bool reads_flag(const std::string& model, std::string_view flag) const override {
    if (flag == "--dropout" || flag == "--no-decay-norm-bias" || flag == "--synthetic-size" ||
        flag == "--synthetic-test-size" || flag == "--device")
      return true;
    if (flag == "--npoints") return model_info(model).default_sample_shape.rank() == 2;
    if (flag == "--feature-transform") return has_feature_transform(model);
    return false;
  }

  std::optional<TaskMetric> primary_metric(const std::string& model) const override {
    if (model_info(model).task == ModelTask::kSegment)
      return TaskMetric{"test_miou", true, "test mean IoU"};
    return TaskMetric{"test_accuracy", true, "test accuracy"};
  }

  std::optional<std::string> tune_metric(const std::string&, std::string*) const override {
    return "val_acc";
  }

  std::unique_ptr<SearchData> load_search_data(const TrainOptions& o,
                                               int64_t largest_batch) const override {
    return load_classifier_search_data(o, largest_batch);
  }

  TrainResult train(const TrainOptions& o) const override { return run_train_classifier(o); }
  TrialResult trial(const TrialOptions& o) const override { return run_trial_classifier(o); }

  EvalReport evaluate(const Checkpoint& c, const std::string& path,
                      const EvalOptions& options) const override {
    HFTA_CHECK(options.text_files.empty(),
               "--text-files: {} holds {} models, a classifier, which reads no text", path,
               c.model);
    // Checked before anything is built or read, as `hfta train` checks it.
    const Device device = checked_device(options.device, c.model, "fused");
    ModelSpec spec = model_spec(c, std::max<int64_t>(c.batch_size, 1));
    spec.device = device;
    auto model = make_model(c.model, spec);
    restore_tensors(c, *model, nullptr);
    // The checkpoint's data unless told otherwise (files from before it was recorded: Fashion-
    // MNIST, the default of `hfta train`).
    std::string dataset = options.dataset, data_dir = options.data_dir;
    if (dataset.empty()) {
      dataset = c.dataset.empty() ? "fashion-mnist" : c.dataset;
      if (data_dir.empty()) data_dir = c.data_dir;
    }
    // Generated data is drawn from the seed: the run's test size (`hfta train`'s default for
    // files from before it was recorded).
    const TrainOptions defaults;
    const int64_t test_size = c.synthetic_test_size > 0 && options.dataset.empty()
                                  ? c.synthetic_test_size
                                  : defaults.synthetic_test_size;
    Data data = load_data(dataset, data_dir, model->sample_shape(), model->num_classes(),
                          defaults.synthetic_train_size, test_size, c.seed,
                          model->task() == ModelTask::kSegment);
    HFTA_CHECK(data.test.sample_shape == model->sample_shape() &&
                   data.test.num_classes == model->num_classes(),
               "{} holds models for samples of shape {} in {} classes; --dataset {} has {} in {}",
               path, model->sample_shape().str(), model->num_classes(), dataset,
               data.test.sample_shape.str(), data.test.num_classes);
    const Evaluation e = hfta::evaluate(*model, data.test, &data.parts);
    EvalReport report{.data = fmt::format("{} test samples of {}", data.test.size, dataset)};
    for (int64_t b = 0; b < c.B; ++b)
      report.model_metrics.push_back(
          fmt::format("test loss {:.4f}  test acc {:.2f}%{}", e.loss[b], 100.0 * e.accuracy[b],
                      e.miou.empty() ? "" : fmt::format("  mIoU {:.4f}", e.miou[b])));
    return report;
  }

  std::string export_model(const Checkpoint& one, const ExportOptions& options) const override {
    auto model = make_model(one.model, model_spec(one, 1));
    restore_tensors(one, *model, nullptr);
    return write_export(*model, options.out, options.source);
  }

  std::string export_init(const InitExportOptions& o) const override {
    Shape sample;
    for (int64_t d : o.sample_shape) sample.push_back(d);
    auto model = make_model(o.model, {.B = 1,
                                      .batch_size = 1,
                                      .seed = o.seed,
                                      .sample_shape = sample,
                                      .num_classes = o.classes});
    return write_export(*model, o.out, fmt::format("initial weights, seed {}", o.seed));
  }
};

}  // namespace

const Task& classifier_task() {
  static const ClassifierTask task;
  return task;
}

}  // namespace hfta
