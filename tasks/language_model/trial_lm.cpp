// `hfta trial --model transformer` (train_lm.h): the sweep's measurement for language models, in
// tokens per second.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "backend/cpu/runtime.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/language_model.h"
#include "models/plan.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "run/hyper.h"
#include "run/plan_choice.h"
#include "tasks/classifier/train_loop.h"
#include "tasks/language_model/train_lm.h"

namespace hfta {

void print_attention_profile(const std::string& report, const AttentionShare& share,
                             double step_ms) {
  fmt::print(stderr,
             "{}\nattention: {:.1f}% of a whole step ({:.3f} of {:.3f} ms, with clipping and the "
             "optimizer)\n",
             report, step_ms > 0 ? 100.0 * share.attention_ms / step_ms : 0.0, share.attention_ms,
             step_ms);
}

TrialResult run_trial_lm(const TrialOptions& o) {
  HFTA_CHECK(o.B >= 1, "--B must be at least 1, got {}", o.B);
  HFTA_CHECK(o.steps >= 1, "--steps must be at least 1, got {}", o.steps);
  HFTA_CHECK(o.warmup_steps >= 0, "--warmup must be >= 0, got {}", o.warmup_steps);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size (token streams) must be at least 1, got {}",
             o.batch_size);
  HFTA_CHECK(o.threads >= 0, "--threads must be 0 or more, got {}", o.threads);
  ExecutionPlan plan = ExecutionPlan::parse(o.plan);
  prepare_runtime(o.threads);

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
  std::vector<float> lr;
  for (int64_t b = 0; b < o.B; ++b) {
    RngStream rng = RngStream::for_model(o.seed, b, kRngHyper);
    lr.push_back(std::pow(10.0f, rng.uniform(-1.0f, 1.0f)));
  }
  const HyperValues h = resolve_hyper("adadelta", {{"lr", lr}}, o.B);
  BpttReader reader(batchify(corpus.train, o.batch_size, corpus.name + " train"), config.bptt);

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
    if (plan.kind == ExecutionPlan::Kind::kAuto) {  // timed on the first window
      TokenWindow first = reader.make_window();
      reader.restart();
      reader.next(first);
      spec.plan = resolve_lm_plan(o.plan, o.model, spec, "adadelta", std::move(first), 0);
    }
    auto model = make_language_model(o.model, spec);
    Net& net = model->net();
    auto optimizer = make_optimizer("adadelta", net, pick_models(h, ids));
    std::vector<TensorView> grads;
    for (const Param& p : net.params()) grads.push_back(p.grad);
    const std::vector<float> clip(static_cast<size_t>(G), 0.25f);
    TokenWindow w = reader.make_window();
    reader.restart();
    int64_t step_tokens = 0;
    auto steps = [&](int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        if (!reader.next(w)) reader.next(w);  // the pass ended: start the next one
        lm_train_step(*model, *optimizer, grads, clip, w);
        step_tokens += w.streams * w.length;
      }
    };
    steps(o.warmup_steps);
    if (o.before_timed) o.before_timed();
    model->reset_profile();
    step_tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    steps(o.steps);
    const double seconds = seconds_since(start);
    r.seconds += seconds;
    tokens += static_cast<double>(G * step_tokens);
    if (model->profiling())
      print_attention_profile(model->profile_report(), model->attention_profile(),
                              seconds / static_cast<double>(o.steps) * 1000.0);
    r.params_per_model = model->params_per_model();
    r.plan = model->plan().str();
    r.flops_per_step += static_cast<double>(G * o.batch_size) * model->train_flops_per_sample();
  }
  r.samples_per_second = tokens / r.seconds;
  r.step_ms = r.seconds / static_cast<double>(o.steps) * 1000.0;
  return r;
}

}  // namespace hfta
