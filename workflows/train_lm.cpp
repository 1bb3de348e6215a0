#include "workflows/train_lm.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "backend/cpu/runtime.h"
#include "core/error.h"
#include "datasets/text_corpus.h"
#include "models/language_model.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "workflows/csv.h"

namespace hfta {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TextCorpus load_corpus(const TrainOptions& o) {
  if (o.dataset == "wikitext2") {
    HFTA_CHECK(!o.data_dir.empty(),
               "--dataset wikitext2 needs --data-dir, the directory of wiki.train.tokens, "
               "wiki.valid.tokens and wiki.test.tokens");
    return load_wikitext2(o.data_dir);
  }
  HFTA_CHECK(o.dataset == "text", "--model {} is a language model: use --dataset text or wikitext2",
             o.model);
  HFTA_CHECK(!o.text_files.empty(),
             "--dataset text needs --text-files A,B,... (files or directories of plain UTF-8 "
             "text, e.g. /usr/share/games/fortunes)");
  return load_text_files(split_paths(o.text_files), {.seed = o.seed});
}

// Streams for an evaluation split: at most --batch-size, and few enough that each stream holds
// one full window.
int64_t eval_streams(const std::vector<int32_t>& ids, int64_t batch_size, int64_t bptt,
                     const std::string& name) {
  const int64_t most = static_cast<int64_t>(ids.size()) / (bptt + 1);
  HFTA_CHECK(most >= 1,
             "the {} split has {} tokens, fewer than one window of --bptt {} + 1: lower --bptt "
             "or give more text",
             name, ids.size(), bptt);
  return std::min(batch_size, most);
}

// Per-model mean loss per token over a whole split (PyTorch's evaluate(): each window's mean
// loss weighted by its length, over length - 1 targets per stream).
std::vector<double> evaluate(LanguageModel& m, BpttReader& reader) {
  std::vector<double> total(static_cast<size_t>(m.B()), 0.0);
  TokenWindow w = reader.make_window();
  int64_t tokens = 0;
  while (reader.next(w)) {
    m.forward(w.inputs(), w.targets(), false);
    for (int64_t b = 0; b < m.B(); ++b)
      total[static_cast<size_t>(b)] +=
          static_cast<double>(m.losses()[static_cast<size_t>(b)]) * static_cast<double>(w.length);
    tokens += w.length;
  }
  for (double& t : total) t /= static_cast<double>(std::max<int64_t>(1, tokens));
  return total;
}

std::string num(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

TrainResult run_train_lm(const TrainOptions& o) {
  const auto start = Clock::now();
  HFTA_CHECK(o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
  HFTA_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got {}", o.batch_size);
  HFTA_CHECK(o.iters_per_epoch >= 0, "--iters-per-epoch must be >= 0, got {}", o.iters_per_epoch);
  HFTA_CHECK(!o.resume, "--resume is not supported for language models yet");
  HFTA_CHECK(o.plan == "auto" || o.plan == "fused",
             "--plan {}: language models run the fused plan only", o.plan);
  const int64_t B = array_size(o.hyper);
  const HyperValues h = resolve_hyper(o.optimizer, o.hyper, B);
  const std::vector<float> clip =
      o.clip.empty() ? std::vector<float>{} : expand_per_model(o.clip, B, "--clip");
  const std::vector<float> gamma = expand_per_model(o.lr_gamma, B, "--lr-gamma");
  const std::vector<int64_t> step_size = expand_per_model(o.lr_step_size, B, "--lr-step-size");
  for (int64_t b = 0; b < B; ++b) {
    LrSchedule::step_decay(step_size[static_cast<size_t>(b)], gamma[static_cast<size_t>(b)])
        .check();
    if (!clip.empty())
      HFTA_CHECK(std::isfinite(clip[static_cast<size_t>(b)]) && clip[static_cast<size_t>(b)] > 0,
                 "model {}: --clip must be positive, got {}", b, clip[static_cast<size_t>(b)]);
  }
  if (o.threads > 0) cpu::set_num_threads(o.threads);

  const TextCorpus corpus = load_corpus(o);
  LmConfig config{.vocab = corpus.vocab_size(),
                  .emsize = o.emsize,
                  .nhid = o.nhid,
                  .nlayers = o.nlayers,
                  .nhead = o.nhead,
                  .bptt = o.bptt,
                  .dropout = o.dropout.value_or(0.2f)};
  BpttReader train(batchify(corpus.train, o.batch_size, corpus.name + " train"), o.bptt);
  BpttReader valid(
      batchify(corpus.valid, eval_streams(corpus.valid, o.batch_size, o.bptt, "validation"),
               corpus.name + " valid"),
      o.bptt);
  BpttReader test(batchify(corpus.test, eval_streams(corpus.test, o.batch_size, o.bptt, "test"),
                           corpus.name + " test"),
                  o.bptt);

  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  HFTA_CHECK(!ec, "cannot create --out directory {}: {}", o.out, ec.message());
  CsvWriter metrics(o.out + "/metrics.csv", {"model", "epoch", "steps", "lr", "train_loss",
                                             "valid_loss", "valid_ppl", "tokens_per_s"});

  std::vector<std::vector<int64_t>> groups;
  if (o.serial) {
    for (int64_t b = 0; b < B; ++b) groups.push_back({b});
  } else {
    groups.emplace_back(static_cast<size_t>(B));
    std::iota(groups[0].begin(), groups[0].end(), 0);
  }
  const int64_t steps_per_epoch = o.iters_per_epoch > 0
                                      ? std::min(o.iters_per_epoch, train.windows_per_pass())
                                      : train.windows_per_pass();
  fmt::print("{}\n", cpu::describe_runtime());
  fmt::print(
      "training {} {} model{} ({}) on {}: vocabulary {}, {} / {} / {} train / valid / test "
      "tokens, {} streams x bptt {}, {} steps per epoch, {} epoch{}\n",
      B, o.model, B == 1 ? "" : "s", o.serial ? "serial: one after another" : "fused", corpus.name,
      corpus.vocab_size(), corpus.train.size(), corpus.valid.size(), corpus.test.size(),
      o.batch_size, o.bptt, steps_per_epoch, o.epochs, o.epochs == 1 ? "" : "s");
  std::fflush(stdout);

  TrainResult result;
  result.B = B;
  result.models.resize(static_cast<size_t>(B));
  std::vector<double> valid_ppl(static_cast<size_t>(B)), test_ppl(static_cast<size_t>(B));
  for (const std::vector<int64_t>& group : groups) {
    const auto group_start = Clock::now();
    const int64_t G = static_cast<int64_t>(group.size());
    auto model = make_language_model(
        o.model,
        {.B = G, .streams = o.batch_size, .seed = o.seed, .model_ids = group, .config = config});
    Net& net = model->net();
    const HyperValues gh = pick_models(h, group);
    auto optimizer = make_optimizer(o.optimizer, net, gh, o.no_decay_norm_bias);
    std::vector<TensorView> grads;
    for (const Param& p : net.params()) grads.push_back(p.grad);
    std::vector<float> group_clip, lr(static_cast<size_t>(G));
    for (int64_t id : group)
      if (!clip.empty()) group_clip.push_back(clip[static_cast<size_t>(id)]);
    TokenWindow w = train.make_window();
    for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
      for (int64_t g = 0; g < G; ++g) {
        const size_t id = static_cast<size_t>(group[static_cast<size_t>(g)]);
        lr[static_cast<size_t>(g)] = static_cast<float>(
            LrSchedule::step_decay(step_size[id], gamma[id]).lr_at(h.at("lr")[id], epoch));
      }
      optimizer->set_lr(lr);
      std::vector<double> loss_sum(static_cast<size_t>(G), 0.0);
      int64_t steps = 0, tokens = 0;
      train.restart();
      const auto epoch_start = Clock::now();
      while (steps < steps_per_epoch && train.next(w)) {
        model->train_step(w.inputs(), w.targets());
        if (!group_clip.empty()) clip_grad_norm_per_model(grads, G, group_clip);
        optimizer->step(net.param_arena(), net.grad_arena());
        for (int64_t g = 0; g < G; ++g)
          loss_sum[static_cast<size_t>(g)] += model->losses()[static_cast<size_t>(g)];
        ++steps;
        tokens += w.streams * w.length;
      }
      const double train_s = seconds_since(epoch_start);
      const double tokens_per_s = static_cast<double>(tokens * G) / std::max(train_s, 1e-9);
      const std::vector<double> vloss = evaluate(*model, valid);
      for (int64_t g = 0; g < G; ++g) {
        const int64_t id = group[static_cast<size_t>(g)];
        const double tl = loss_sum[static_cast<size_t>(g)] / static_cast<double>(steps);
        const double vl = vloss[static_cast<size_t>(g)];
        metrics.row({std::to_string(id), std::to_string(epoch + 1), std::to_string(steps),
                     num(lr[static_cast<size_t>(g)]), num(tl), num(vl), num(std::exp(vl)),
                     num(tokens_per_s)});
        fmt::print(
            "model {} epoch {}: lr {:g}, train loss {:.3f}, valid loss {:.3f}, valid ppl {:.1f}, "
            "{:.0f} tokens/s (array)\n",
            id, epoch + 1, lr[static_cast<size_t>(g)], tl, vl, std::exp(vl), tokens_per_s);
        ModelResult& r = result.models[static_cast<size_t>(id)];
        r.model = id;
        r.final_train_loss = tl;
        valid_ppl[static_cast<size_t>(id)] = std::exp(vl);
      }
      std::fflush(stdout);
    }
    const std::vector<double> tloss = evaluate(*model, test);
    const double wall = seconds_since(group_start);
    for (int64_t g = 0; g < G; ++g) {
      ModelResult& r = result.models[static_cast<size_t>(group[static_cast<size_t>(g)])];
      r.test_loss = tloss[static_cast<size_t>(g)];
      test_ppl[static_cast<size_t>(r.model)] = std::exp(r.test_loss);
      r.wall_seconds = wall;
    }
  }
  result.wall_seconds = seconds_since(start);

  std::vector<std::string> header = {"model"};
  for (const auto& [name, values] : h) header.push_back(name);
  for (const char* c : {"clip", "lr_gamma", "lr_step_size", "train_loss", "valid_ppl", "test_loss",
                        "test_ppl", "wall_s"})
    header.emplace_back(c);
  CsvWriter summary(o.out + "/summary.csv", header);
  for (int64_t b = 0; b < B; ++b) {
    const size_t i = static_cast<size_t>(b);
    const ModelResult& r = result.models[i];
    std::vector<std::string> row = {std::to_string(b)};
    for (const auto& [name, values] : h) row.push_back(num(values[i]));
    row.push_back(clip.empty() ? "" : num(clip[i]));
    row.push_back(num(gamma[i]));
    row.push_back(std::to_string(step_size[i]));
    row.push_back(num(r.final_train_loss));
    row.push_back(num(valid_ppl[i]));
    row.push_back(num(r.test_loss));
    row.push_back(num(test_ppl[i]));
    row.push_back(num(r.wall_seconds));
    summary.row(row);
  }
  const auto best = std::min_element(valid_ppl.begin(), valid_ppl.end());
  fmt::print(
      "done in {:.1f} s; vocabulary {}; best: model {} with validation perplexity {:.1f}; "
      "results in {}/summary.csv and {}/metrics.csv\n",
      result.wall_seconds, corpus.vocab_size(), best - valid_ppl.begin(), *best, o.out, o.out);
  return result;
}

}  // namespace hfta
