#include "tasks/classifier/resume.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "io/csv.h"
#include "run/resume_check.h"

namespace hfta {

Checkpoint make_checkpoint(const TrainOptions& o, const ModelConfig& config,
                           const HyperValues& values, const ArrayProgress& p,
                           const ModelArray& array) {
  Checkpoint c;
  fill_checkpoint(c, o, config, values, p, array);
  return c;
}

void fill_checkpoint(Checkpoint& c, const TrainOptions& o, const ModelConfig& config,
                     const HyperValues& values, const ArrayProgress& p, const ModelArray& array) {
  c.model = config.name;
  c.sample_shape.assign(config.sample_shape.begin(), config.sample_shape.end());
  c.num_classes = config.num_classes;
  c.dropout = config.dropout.value_or(-1.0f);
  c.no_decay_norm_bias = config.no_decay_norm_bias;
  c.B = static_cast<int64_t>(array.ids.size());
  c.seed = o.seed;
  c.batch_size = o.batch_size;
  c.dataset = o.dataset;
  c.data_dir = o.data_dir;
  c.synthetic_test_size = o.synthetic_test_size;
  c.plan = array.model->plan().str();
  c.model_ids = array.ids;
  c.optimizer = o.optimizer;
  c.hyper = hyper_record(values);
  c.epoch = p.epochs_done;
  c.batch_in_epoch = p.batch_in_epoch;
  c.step = p.step;
  c.epoch_loss_sum = p.epoch_loss;
  c.last_train_loss = p.last_train_loss;
  auto steps = array.optimizer->steps();
  c.optimizer_steps.assign(steps.begin(), steps.end());
  c.skipped_steps = p.skipped;
  c.forward_origins = array.model->net().forward_origins();
  capture_tensors(*array.model, array.optimizer.get(), c.tensors, true, c.borrow_tensors);
}

ArrayProgress restore_checkpoint(const Checkpoint& c, ModelArray& array) {
  restore_tensors(c, *array.model, array.optimizer.get());
  return {.step = c.step,
          .epochs_done = c.epoch,
          .batch_in_epoch = c.batch_in_epoch,
          .epoch_loss = c.epoch_loss_sum,
          .last_train_loss = c.last_train_loss,
          .skipped = c.skipped_steps};
}

void check_resumable(const Checkpoint& c, const TrainOptions& o, const ModelConfig& config,
                     const HyperValues& values, const std::vector<int64_t>& ids,
                     const std::string& path) {
  const std::vector<int64_t> sample(config.sample_shape.begin(), config.sample_shape.end());
  ResumeExpectation now{.model = o.model,
                        .optimizer = o.optimizer,
                        .seed = o.seed,
                        .batch_size = o.batch_size,
                        .model_ids = ids,
                        .epochs = o.epochs};
  now.settings = {
      {"--dataset",
       fmt::format("samples [{}] in {} classes", fmt::join(c.sample_shape, ", "), c.num_classes),
       c.sample_shape == sample && c.num_classes == config.num_classes
           ? fmt::format("samples [{}] in {} classes", fmt::join(c.sample_shape, ", "),
                         c.num_classes)
           : fmt::format("[{}] in {}", fmt::join(sample, ", "), config.num_classes)},
      {"--dropout", c.dropout < 0 ? "the model's own" : fmt::format("{:g}", c.dropout),
       config.dropout ? fmt::format("{:g}", *config.dropout) : "the model's own"},
      {"--no-decay-norm-bias", c.no_decay_norm_bias ? "on" : "off",
       config.no_decay_norm_bias ? "on" : "off"}};
  // The rows of the hyperparameter table this optimizer reads.
  for (const HyperRow& row : hyper_table())
    if (auto it = values.find(std::string(row.name)); it != values.end())
      now.hyper[it->first] = it->second;
  check_resumable(c, path, now);
}

}  // namespace hfta
