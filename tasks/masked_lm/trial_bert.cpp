// `hfta trial --model bert` (train_bert.h): the sweep's measurement for BERT, in tokens per
// second, as the Transformer LM's (trial_lm.cpp) with the masked-LM step of `hfta train`.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/device_memory.h"
#include "core/error.h"
#include "core/rng.h"
#include "datasets/bert_data.h"
#include "models/masked_lm.h"
#include "optim/optimizer.h"
#include "run/hyper.h"
#include "run/plan_choice.h"
#include "run/trial_loop.h"
#include "tasks/language_model/train_lm.h"
#include "tasks/masked_lm/train_bert.h"
#include "tasks/tasks.h"

namespace hfta {

namespace {

class BertTrialArray final : public TrialArray {
 public:
  BertTrialArray(std::unique_ptr<MaskedLm> model, std::unique_ptr<Optimizer> optimizer,
                 const MlmReader& reader, uint64_t seed)
      : model_(std::move(model)),
        optimizer_(std::move(optimizer)),
        reader_(reader),
        window_(reader.make_window()),
        seed_(seed) {}

  double steps(int64_t n) override {
    Net& net = model_->net();
    int64_t tokens = 0;
    for (int64_t i = 0; i < n; ++i, ++step_) {
      reader_.fill(step_ % reader_.windows(), seed_, static_cast<uint64_t>(step_), window_);
      lm_array_step(net, model_->layout().is_fused(), *optimizer_, {}, {},
                    [&](const MaskedLm::AfterBackward& after_backward) {
                      model_->train_step(window_.batch(), after_backward);
                    });
      tokens += window_.streams * window_.length;
    }
    synchronize(model_->spec().device);  // the timed steps end when the device is done
    return static_cast<double>(tokens);
  }
  void reset_profile() override { model_->net().reset_profile(); }
  void print_profile(double step_ms) const override {
    const Net& net = model_->net();
    if (net.profiling() && model_->layout().is_fused())  // under a plan `net` holds only state
      print_attention_profile(attention_profile_report(model_->name(), net), attention_share(net),
                              step_ms);
  }
  int64_t params_per_model() const override { return model_->params_per_model(); }
  std::string plan() const override { return model_->plan().str(); }
  double flops_per_step() const override {
    return static_cast<double>(model_->B() * model_->spec().streams) *
           model_->train_flops_per_sample();
  }

 private:
  std::unique_ptr<MaskedLm> model_;
  std::unique_ptr<Optimizer> optimizer_;
  const MlmReader& reader_;
  MlmWindow window_;
  uint64_t seed_;
  int64_t step_ = 0;
};

}  // namespace

TrialResult run_trial_bert(const TrialOptions& o) {
  check_trial_options(o, 1, "token streams");
  // A bad --plan or --device fails before loading; a device runs plan fused (auto included).
  const Device device = checked_device(o.device, o.plan);
  const ExecutionPlan plan =
      device == Device::kCpu ? ExecutionPlan::parse(o.plan) : ExecutionPlan::fused();
  prepare_runtime(o.threads, o.deterministic);

  // HFTA's examples/bert sizes (`hfta train --model bert`'s defaults, apply_bert_defaults);
  // Adadelta with learning rates log-uniform in [0.1, 10] per model, no clipping (the example's).
  TrainOptions sizes;
  apply_bert_defaults(sizes, [](const char*) { return false; });
  // Synthetic text: 8 distinct full windows per stream.
  const TextCorpus corpus = load_lm_corpus({.dataset = o.dataset,
                                            .text_files = o.text_files,
                                            .data_dir = o.data_dir,
                                            .seed = o.seed,
                                            .vocab = o.vocab,
                                            .synthetic_tokens = o.batch_size * 8 * sizes.bptt});
  // Masked-only output, as `hfta train` (models/masked_lm.h).
  const int64_t predicted_per_stream = mlm_predicted_per_stream(sizes.bptt, o.batch_size);
  const MlmMasking masking{.words = corpus.vocab_size(),
                           .eos = corpus.dictionary.find(kEos),
                           .max_per_stream = predicted_per_stream};
  const LmConfig config{.vocab = corpus.vocab_size() + 1,  // + the mask token
                        .emsize = sizes.emsize,
                        .nhid = sizes.nhid,
                        .nlayers = sizes.nlayers,
                        .nhead = sizes.nhead,
                        .bptt = sizes.bptt,
                        .dropout = 0.1f};
  const MlmReader reader(batchify(corpus.train, o.batch_size, corpus.name + " train"), config.bptt,
                         masking);
  const HyperValues h =
      resolve_hyper("adadelta", {{"lr", trial_learning_rates(o, -1.0f, 1.0f)}}, o.B);
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
      MlmWindow w = reader.make_window();
      reader.fill(0, o.seed, 0, w);
      spec.plan = resolve_mlm_plan(o.plan, o.model, spec, predicted_per_stream, "adadelta", w, 0);
    }
    auto model = make_masked_lm(o.model, spec, predicted_per_stream);
    auto optimizer = make_optimizer("adadelta", model->net(), pick_models(h, ids));
    return std::make_unique<BertTrialArray>(std::move(model), std::move(optimizer), reader, o.seed);
  });
}

}  // namespace hfta
