// The language-model runs' shared parts (lm_run.h).
#include "tasks/language_model/lm_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "io/interrupt.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "tasks/classifier/resume.h"

namespace hfta {

namespace {

std::string num(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

std::map<std::string, std::vector<double>> LmRunHyper::record(
    const std::vector<int64_t>& ids) const {
  std::map<std::string, std::vector<double>> h = hyper_record(pick_models(optimizer, ids));
  for (int64_t id : ids) {
    const size_t i = static_cast<size_t>(id);
    if (!clip.empty()) h["clip"].push_back(clip[i]);
    h["lr_gamma"].push_back(gamma[i]);
    h["lr_step_size"].push_back(static_cast<double>(step_size[i]));
  }
  return h;
}

std::vector<std::string> LmRunHyper::summary_header() const {
  std::vector<std::string> header = {"model"};
  for (const auto& [name, values] : optimizer) header.push_back(name);
  for (const char* c : {"clip", "lr_gamma", "lr_step_size"}) header.emplace_back(c);
  return header;
}

std::vector<std::string> LmRunHyper::summary_row(int64_t b) const {
  const size_t i = static_cast<size_t>(b);
  std::vector<std::string> row = {std::to_string(b)};
  for (const auto& [name, values] : optimizer) row.push_back(num(values[i]));
  row.push_back(clip.empty() ? "" : num(clip[i]));
  row.push_back(num(gamma[i]));
  row.push_back(std::to_string(step_size[i]));
  return row;
}

LmRunHyper lm_run_hyper(const TrainOptions& o, int64_t B) {
  LmRunHyper hy{
      .optimizer = resolve_hyper(o.optimizer, o.hyper, B),
      .clip = o.clip.empty() ? std::vector<float>{} : expand_per_model(o.clip, B, "--clip"),
      .gamma = expand_per_model(o.lr_gamma, B, "--lr-gamma"),
      .step_size = expand_per_model(o.lr_step_size, B, "--lr-step-size")};
  for (int64_t b = 0; b < B; ++b) {
    const size_t i = static_cast<size_t>(b);
    LrSchedule::step_decay(hy.step_size[i], hy.gamma[i]).check();
    if (!hy.clip.empty())
      HFTA_CHECK(std::isfinite(hy.clip[i]) && hy.clip[i] > 0,
                 "model {}: --clip must be positive, got {}", b, hy.clip[i]);
  }
  return hy;
}

std::vector<int64_t> lm_model_streams(const TrainOptions& o, const std::vector<int64_t>& group) {
  std::vector<int64_t> streams;
  for (int64_t id : group) {
    if (o.model_streams.empty()) {
      streams.push_back(o.first_model_id + id);
      continue;
    }
    HFTA_CHECK(id >= 0 && id < static_cast<int64_t>(o.model_streams.size()),
               "model {} has no RNG stream: {} streams given", id, o.model_streams.size());
    streams.push_back(o.model_streams[static_cast<size_t>(id)]);
  }
  return streams;
}

int64_t lm_epoch_first_window(int64_t epoch, int64_t steps_per_epoch, int64_t windows) {
  if (steps_per_epoch >= windows) return 0;
  // Reduced first: epoch * steps could overflow for long runs; windows stay far below 2^31.
  return (epoch % windows) * (steps_per_epoch % windows) % windows;
}

std::vector<std::optional<Checkpoint>> load_lm_resume(
    const TrainOptions& o, const std::vector<std::vector<int64_t>>& groups,
    const LmCheckpointInfo& info, const LmRunHyper& hyper) {
  std::vector<std::optional<Checkpoint>> resume(groups.size());
  if (!o.resume) return resume;
  std::map<int64_t, int64_t> epochs_done;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string path = checkpoint_path(o.out, o.serial, groups[g]);
    if (!std::filesystem::exists(path)) continue;
    resume[g] = load_checkpoint(path);
    check_lm_resumable(*resume[g], path, o, info, hyper.record(groups[g]), groups[g]);
    check_lm_checkpoint(*resume[g], path);
    for (int64_t id : groups[g]) epochs_done[id] = resume[g]->epoch;
  }
  HFTA_CHECK(!epochs_done.empty(),
             "--resume: no checkpoint in {} (expected {}): run without --resume to start", o.out,
             checkpoint_path(o.out, o.serial, groups[0]));
  prune_lm_metrics(o.out + "/metrics.csv", epochs_done);
  return resume;
}

LmArrayRun::LmArrayRun(const TrainOptions& o, Net& net, const std::vector<int64_t>& group,
                       const LmRunHyper& hyper, const LmConfig& config,
                       const LmCheckpointInfo& info, const std::optional<Checkpoint>& resume,
                       std::string who)
    : o_(o),
      net_(net),
      group_(group),
      hyper_(hyper),
      config_(config),
      info_(info),
      record_(hyper.record(group)),
      optimizer_(make_optimizer(o.optimizer, net, pick_models(hyper.optimizer, group),
                                o.no_decay_norm_bias)),
      lr_(group.size()),
      progress_{.epoch_loss = std::vector<double>(group.size(), 0.0),
                .last_train_loss = std::vector<double>(group.size(), 0.0)},
      path_(checkpoint_path(o.out, o.serial, group)),
      who_(std::move(who)),
      periodic_(
          path_,
          {.every_steps = o.checkpoint ? o.checkpoint_every : 0,
           .interval_seconds = o.checkpoint ? o.checkpoint_interval_seconds : 0.0},
          [this](Checkpoint& c) {
            fill_lm_checkpoint(c, o_, config_, group_, record_, progress_, net_, *optimizer_,
                               info_);
          },
          [this](const std::string& line) {
            if (bar_) bar_->finish();  // a mid-epoch line must not land inside the bar
            fmt::print("{}: {}\n", who_, line);
            std::fflush(stdout);  // a killed run's log shows every checkpoint it wrote
          },
          [this](Checkpoint& c) {  // on the writer thread: shapes only, never the training's values
            capture_tensors(net_, optimizer_.get(), c.tensors, /*values=*/false);
          }) {
  for (const Param& p : net.params()) grads_.push_back(p.grad);
  if (!hyper.clip.empty())
    for (int64_t id : group) clip_.push_back(hyper.clip[static_cast<size_t>(id)]);
  if (resume) {
    progress_ = restore_lm_checkpoint(*resume, net, *optimizer_);
    fmt::print("{}: resuming after step {} (epoch {}, batch {})\n", who_, progress_.step,
               progress_.epochs_done + 1, progress_.batch_in_epoch);
  }
  periodic_.start(progress_.step);
}

void LmArrayRun::begin_epoch(int64_t epoch, int64_t windows) {
  for (size_t g = 0; g < group_.size(); ++g) {
    const size_t id = static_cast<size_t>(group_[g]);
    lr_[g] = static_cast<float>(LrSchedule::step_decay(hyper_.step_size[id], hyper_.gamma[id])
                                    .lr_at(hyper_.optimizer.at("lr")[id], epoch));
  }
  optimizer_->set_lr(lr_);
  if (progress_.batch_in_epoch == 0)
    std::fill(progress_.epoch_loss.begin(), progress_.epoch_loss.end(), 0.0);
  bar_.emplace(fmt::format("epoch {}/{} {}", epoch + 1, o_.epochs, who_), windows,
               o_.progress && stdout_is_terminal());
}

void LmArrayRun::train_step(LanguageModel& model, TokenWindow& window, int64_t windows_done) {
  lm_train_step(model, *optimizer_, grads_, clip_, window);
  count_step(model.losses(), windows_done);
}

void LmArrayRun::train_step(MaskedLm& model, const MlmBatch& batch, int64_t windows_done) {
  lm_array_step(model.net(), model.layout().is_fused(), *optimizer_, grads_, clip_,
                [&](const MaskedLm::AfterBackward& after_backward) {
                  model.train_step(batch, after_backward);
                });
  count_step(model.losses(), windows_done);
}

void LmArrayRun::count_step(const std::vector<float>& losses, int64_t windows_done) {
  for (size_t g = 0; g < group_.size(); ++g) progress_.epoch_loss[g] += losses[g];
  ++progress_.step;
  progress_.batch_in_epoch = windows_done;
  if (bar_) bar_->update(windows_done, format_losses(losses));
  periodic_.after_step(progress_.step);
  if (InterruptGuard::interrupted()) {
    save();
    fail_interrupted(progress_.step, o_.checkpoint ? path_ : "");
  }
}

std::vector<double> LmArrayRun::train_losses(int64_t windows) {
  if (bar_) bar_->finish();
  for (size_t g = 0; g < group_.size(); ++g)
    progress_.last_train_loss[g] =
        progress_.epoch_loss[g] / static_cast<double>(std::max<int64_t>(1, windows));
  return progress_.last_train_loss;
}

void LmArrayRun::end_epoch(int64_t epoch) {
  std::fill(progress_.epoch_loss.begin(), progress_.epoch_loss.end(), 0.0);
  progress_.epochs_done = epoch + 1;
  progress_.batch_in_epoch = 0;
  save();
}

void LmArrayRun::save() {
  if (o_.checkpoint) periodic_.save_now(progress_.step);
}

}  // namespace hfta
