// The language-model runs' shared parts (lm_run.h).
#include "tasks/language_model/lm_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "io/interrupt.h"
#include "models/slots.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "optim/slots.h"
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

LmRunHyper LmRunHyper::pick(const std::vector<int64_t>& ids) const {
  LmRunHyper p{.optimizer = pick_models(optimizer, ids)};
  for (int64_t id : ids) {
    const size_t i = static_cast<size_t>(id);
    if (!clip.empty()) p.clip.push_back(clip.at(i));
    p.gamma.push_back(gamma.at(i));
    p.step_size.push_back(step_size.at(i));
  }
  return p;
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

void check_lm_resume(const TrainOptions& o, const Checkpoint& c, const std::string& path,
                     const LmCheckpointInfo& info, const LmRunHyper& hyper,
                     const std::vector<int64_t>& ids) {
  check_lm_resumable(c, path, o, info, hyper.record(ids), ids);
  check_lm_checkpoint(c, path);
}

namespace {
std::vector<int64_t> positions(size_t n) {
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  return p;
}
}  // namespace

LmRun::LmRun(const TrainOptions& o, Net& net, const std::vector<int64_t>& group,
             const LmRunHyper& hyper, const LmConfig& config, const LmCheckpointInfo& info)
    : o_(o),
      net_(&net),
      group_(group),
      hyper_(hyper.pick(group)),
      config_(config),
      info_(info),
      record_(hyper_.record(positions(group.size()))),
      optimizer_(make_optimizer(o.optimizer, net, hyper_.optimizer, o.no_decay_norm_bias)),
      lr_(group.size()) {
  for (const Param& p : net.params()) grads_.push_back(p.grad);
  clip_ = hyper_.clip;
}

bool LmRun::keep_models(std::span<const int64_t> keep) {
  Net& compacted = compact_model(keep);
  const std::vector<int64_t> kept(keep.begin(), keep.end());
  optimizer_ = compact_optimizer(*optimizer_, compacted, keep);
  net_ = &compacted;
  grads_.clear();
  for (const Param& p : compacted.params()) grads_.push_back(p.grad);
  hyper_ = hyper_.pick(kept);
  clip_ = hyper_.clip;
  group_ = positions(kept.size());
  lr_.assign(kept.size(), 0.0f);
  record_ = hyper_.record(group_);
  return true;
}

bool LmRun::refill_model(int64_t slot, const TrainOptions& one) {
  const LmRunHyper h = lm_run_hyper(one, 1);
  if (h.clip.empty() != hyper_.clip.empty()) return false;
  std::map<std::string, float> named;
  for (const auto& [name, v] : h.optimizer) named[name] = v.at(0);
  if (named.size() != hyper_.optimizer.size()) return false;
  optimizer_->reset_slot(slot, SlotHyper::from_named(named));  // checks before it changes
  const size_t i = static_cast<size_t>(slot);
  for (auto& [name, v] : hyper_.optimizer) v.at(i) = h.optimizer.at(name).at(0);
  if (!h.clip.empty()) hyper_.clip.at(i) = h.clip[0];
  hyper_.gamma.at(i) = h.gamma[0];
  hyper_.step_size.at(i) = h.step_size[0];
  clip_ = hyper_.clip;
  record_ = hyper_.record(positions(group_.size()));
  reinit_model(slot, one.first_model_id);
  return true;
}

void LmRun::fill_checkpoint(Checkpoint& c, const ArrayProgress& p) {
  fill_lm_checkpoint(c, o_, config_, group_, record_, p, *net_, *optimizer_, info_);
}

void LmRun::reserve_checkpoint(Checkpoint& c) {
  // On the writer thread: shapes only, never the training's values.
  capture_tensors(*net_, optimizer_.get(), c.tensors, /*values=*/false);
}

ArrayProgress LmRun::restore(const Checkpoint& c) {
  return restore_lm_checkpoint(c, *net_, *optimizer_);
}

void LmRun::set_epoch_lr(int64_t epoch) {
  for (size_t g = 0; g < group_.size(); ++g)
    lr_[g] = static_cast<float>(LrSchedule::step_decay(hyper_.step_size[g], hyper_.gamma[g])
                                    .lr_at(hyper_.optimizer.at("lr")[g], epoch));
  optimizer_->set_lr(lr_);
}

const std::vector<float>& LmRun::step(LanguageModel& model, TokenWindow& window) {
  lm_train_step(model, *optimizer_, grads_, clip_, window);
  return model.losses();
}

const std::vector<float>& LmRun::step(MaskedLm& model, const MlmBatch& batch) {
  lm_array_step(model.net(), model.layout().is_fused(), *optimizer_, grads_, clip_,
                [&](const MaskedLm::AfterBackward& after_backward) {
                  model.train_step(batch, after_backward);
                });
  return model.losses();
}

}  // namespace hfta
