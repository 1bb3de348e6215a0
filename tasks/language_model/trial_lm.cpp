// `hfta trial --model transformer` (train_lm.h): the sweep's measurement for language models, in
// tokens per second.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/language_model.h"
#include "models/plan.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "run/hyper.h"
#include "run/plan_choice.h"
#include "run/trial_loop.h"
#include "tasks/language_model/train_lm.h"
#include "tasks/tasks.h"

namespace hfta {

void print_attention_profile(const std::string& report, const AttentionShare& share,
                             double step_ms) {
  fmt::print(stderr,
             "{}\nattention: {:.1f}% of a whole step ({:.3f} of {:.3f} ms, with clipping and the "
             "optimizer)\n",
             report, step_ms > 0 ? 100.0 * share.attention_ms / step_ms : 0.0, share.attention_ms,
             step_ms);
}

namespace {

class LmTrialArray final : public TrialArray {
 public:
  LmTrialArray(std::unique_ptr<LanguageModel> model, std::unique_ptr<Optimizer> optimizer,
               BpttReader& reader)
      : model_(std::move(model)),
        optimizer_(std::move(optimizer)),
        reader_(reader),
        window_(reader.make_window()) {
    for (const Param& p : model_->net().params()) grads_.push_back(p.grad);
    clip_.assign(static_cast<size_t>(model_->B()), 0.25f);
    reader_.restart();
  }

  double steps(int64_t n) override {
    int64_t tokens = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (!reader_.next(window_)) reader_.next(window_);  // the pass ended: start the next one
      lm_train_step(*model_, *optimizer_, grads_, clip_, window_);
      tokens += window_.streams * window_.length;
    }
    synchronize(model_->spec().device);  // the timed steps end when the device is done
    return static_cast<double>(tokens);
  }
  void reset_profile() override { model_->reset_profile(); }
  void print_profile(double step_ms) const override {
    if (model_->profiling())
      print_attention_profile(model_->profile_report(), model_->attention_profile(), step_ms);
  }
  int64_t params_per_model() const override { return model_->params_per_model(); }
  std::string plan() const override { return model_->plan().str(); }
  double flops_per_step() const override {
    return static_cast<double>(model_->B() * model_->spec().streams) *
           model_->train_flops_per_sample();
  }

 private:
  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<Optimizer> optimizer_;
  BpttReader& reader_;
  std::vector<TensorView> grads_;
  std::vector<float> clip_;
  TokenWindow window_;
};

}  // namespace

TrialResult run_trial_lm(const TrialOptions& o) {
  check_trial_options(o, 1, "token streams");
  const Device device = checked_device(o.device, o.plan);  // before the corpus is read
  // A device runs plan fused (auto included); checked_device refused the others.
  const ExecutionPlan plan =
      device == Device::kCpu ? ExecutionPlan::parse(o.plan) : ExecutionPlan::fused();
  prepare_runtime(o.threads, o.deterministic);

  // HFTA's examples/transformer sizes (LmConfig's defaults); Adadelta with learning rates
  // log-uniform in [0.1, 10] per model, clip 0.25.
  LmConfig config;
  // Synthetic text: 8 distinct full windows per stream.
  const TextCorpus corpus =
      load_lm_corpus({.dataset = o.dataset,
                      .text_files = o.text_files,
                      .data_dir = o.data_dir,
                      .seed = o.seed,
                      .vocab = o.vocab,
                      .synthetic_tokens = o.batch_size * (8 * config.bptt + 1)});
  config.vocab = corpus.vocab_size();
  const HyperValues h =
      resolve_hyper("adadelta", {{"lr", trial_learning_rates(o, -1.0f, 1.0f)}}, o.B);
  BpttReader reader(batchify(corpus.train, o.batch_size, corpus.name + " train"), config.bptt);
  return run_timed_trial(o, [&](const std::vector<int64_t>& ids) {
    LanguageModelSpec spec{.B = static_cast<int64_t>(ids.size()),
                           .streams = o.batch_size,
                           .seed = o.seed,
                           .model_ids = ids,
                           .config = config,
                           .plan = plan,
                           .threads = o.threads,
                           .device = device};
    if (plan.kind == ExecutionPlan::Kind::kAuto) {  // timed on the first window
      TokenWindow first = reader.make_window();
      reader.restart();
      reader.next(first);
      spec.plan = resolve_lm_plan(o.plan, o.model, spec, "adadelta", std::move(first), 0);
    }
    auto model = make_language_model(o.model, spec);
    auto optimizer = make_optimizer("adadelta", model->net(), pick_models(h, ids));
    return std::make_unique<LmTrialArray>(std::move(model), std::move(optimizer), reader);
  });
}

}  // namespace hfta
