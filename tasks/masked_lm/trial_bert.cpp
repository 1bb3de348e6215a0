// `hfta trial --model bert` (train_bert.h): the sweep's measurement for BERT, in tokens per
// second, as the Transformer LM's (trial_lm.cpp) with the masked-LM step of `hfta train`.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "datasets/bert_data.h"
#include "models/masked_lm.h"
#include "optim/optimizer.h"
#include "run/hyper.h"
#include "run/plan_choice.h"
#include "tasks/classifier/train_loop.h"
#include "tasks/language_model/train_lm.h"
#include "tasks/masked_lm/train_bert.h"

namespace hfta {

TrialResult run_trial_bert(const TrialOptions& o) {
  HFTA_CHECK(o.B >= 1, "--B must be at least 1, got {}", o.B);
  HFTA_CHECK(o.steps >= 1, "--steps must be at least 1, got {}", o.steps);
  HFTA_CHECK(o.warmup_steps >= 0, "--warmup must be >= 0, got {}", o.warmup_steps);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size (token streams) must be at least 1, got {}",
             o.batch_size);
  HFTA_CHECK(o.threads >= 0, "--threads must be 0 or more, got {}", o.threads);
  const ExecutionPlan plan = ExecutionPlan::parse(o.plan);  // a bad --plan fails before loading
  prepare_runtime(o.threads);

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
  std::vector<float> lr;
  for (int64_t b = 0; b < o.B; ++b) {
    RngStream rng = RngStream::for_model(o.seed, b, kRngHyper);
    lr.push_back(std::pow(10.0f, rng.uniform(-1.0f, 1.0f)));
  }
  const HyperValues h = resolve_hyper("adadelta", {{"lr", lr}}, o.B);

  const std::vector<std::vector<int64_t>> groups = array_groups(o.B, o.serial);
  TrialResult r{};
  double tokens = 0.0;  // summed over models
  for (const auto& ids : groups) {
    const int64_t G = static_cast<int64_t>(ids.size());
    LanguageModelSpec spec{.B = G,
                           .streams = o.batch_size,
                           .seed = o.seed,
                           .model_ids = ids,
                           .config = config,
                           .plan = plan,
                           .threads = o.threads};
    MlmWindow w = reader.make_window();
    if (plan.kind == ExecutionPlan::Kind::kAuto) {  // timed on the first window
      reader.fill(0, o.seed, 0, w);
      spec.plan = resolve_mlm_plan(o.plan, o.model, spec, predicted_per_stream, "adadelta", w, 0);
    }
    auto model = make_masked_lm(o.model, spec, predicted_per_stream);
    Net& net = model->net();
    auto optimizer = make_optimizer("adadelta", net, pick_models(h, ids));
    int64_t step = 0, step_tokens = 0;
    auto steps = [&](int64_t n) {
      for (int64_t i = 0; i < n; ++i, ++step) {
        reader.fill(step % reader.windows(), o.seed, static_cast<uint64_t>(step), w);
        lm_array_step(net, model->layout().is_fused(), *optimizer, {}, {},
                      [&](const MaskedLm::AfterBackward& after_backward) {
                        model->train_step(w.batch(), after_backward);
                      });
        step_tokens += w.streams * w.length;
      }
    };
    steps(o.warmup_steps);
    if (o.before_timed) o.before_timed();
    net.reset_profile();
    step_tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    steps(o.steps);
    const double seconds = seconds_since(start);
    r.seconds += seconds;
    if (net.profiling() && model->layout().is_fused())  // under a plan `net` holds only state
      print_attention_profile(attention_profile_report(o.model, net), attention_share(net),
                              seconds / static_cast<double>(o.steps) * 1000.0);
    tokens += static_cast<double>(G * step_tokens);
    r.params_per_model = model->params_per_model();
    r.plan = model->plan().str();
    r.flops_per_step += static_cast<double>(G * o.batch_size) * model->train_flops_per_sample();
  }
  r.samples_per_second = tokens / r.seconds;
  r.step_ms = r.seconds / static_cast<double>(o.steps) * 1000.0;
  return r;
}

}  // namespace hfta
