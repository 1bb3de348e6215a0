// The masked-language-model task (models/masked_lm.h; trained by train_bert.cpp): its flags and
// metric, `hfta eval` and `hfta export` of its checkpoints.
#include <fmt/format.h>

#include "core/error.h"
#include "io/checkpoint.h"
#include "models/masked_lm.h"
#include "tasks/masked_lm/export_bert.h"
#include "tasks/masked_lm/train_bert.h"
#include "tasks/tasks.h"

namespace hfta {

namespace {

class MaskedLmTask final : public Task {
 public:
  std::string_view kind() const override { return "masked language model"; }
  std::vector<std::string> model_names() const override { return masked_lm_names(); }

  // BERT reads text or WikiText-2 only: no synthetic-text flags (--vocab, --synthetic-size).
  bool reads_flag(const std::string&, std::string_view flag) const override {
    // --device: every op of BERT has a CUDA kernel (docs/cuda.md).
    return reads_text_model_flag(flag) || flag == "--device";
  }

  std::optional<TaskMetric> primary_metric(const std::string&) const override {
    return TaskMetric{"valid_loss", false, "validation masked-LM loss"};
  }

  std::optional<std::string> tune_metric(const std::string&, std::string*) const override {
    return "val_loss";
  }
  std::unique_ptr<SearchData> load_search_data(const TrainOptions& o, int64_t) const override {
    return load_bert_search_data(o);
  }

  std::string_view sample_unit() const override { return "tokens"; }
  void apply_defaults(TrainOptions& o,
                      const std::function<bool(const char*)>& given) const override {
    apply_bert_defaults(o, given);
  }
  TrainResult train(const TrainOptions& o) const override { return run_train_bert(o); }
  TrialResult trial(const TrialOptions& o) const override { return run_trial_bert(o); }

  EvalReport evaluate(const Checkpoint& c, const std::string& path,
                      const EvalOptions& options) const override {
    HFTA_CHECK(options.device == "cpu",
               "--device {}: hfta eval scores a BERT checkpoint on the CPU (train on the GPU, "
               "evaluate here: the checkpoint is the same file)",
               options.device);
    const BertEvaluation e = evaluate_bert_checkpoint(c, path,
                                                      {.dataset = options.dataset,
                                                       .text_files = options.text_files,
                                                       .data_dir = options.data_dir});
    EvalReport report{.data = fmt::format("{} masked test windows of {}", e.windows, e.corpus)};
    for (int64_t b = 0; b < c.B; ++b)
      report.model_metrics.push_back(fmt::format("test MLM loss {:.4f}  test MLM acc {:.2f}%",
                                                 e.loss[b], 100.0 * e.accuracy[b]));
    return report;
  }

  std::string export_model(const Checkpoint& one, const ExportOptions& options) const override {
    return export_bert_checkpoint(one, options.out, options.source);
  }

  std::string export_init(const InitExportOptions& o) const override {
    return export_masked_lm(o.model, o.out, o.seed,
                            {.vocab = o.vocab,
                             .emsize = o.emsize,
                             .nhid = o.nhid,
                             .nlayers = o.nlayers,
                             .nhead = o.nhead},
                            o.text_files);
  }
};

}  // namespace

const Task& masked_lm_task() {
  static const MaskedLmTask task;
  return task;
}

}  // namespace hfta
