#include "tasks/classifier/results.h"

#include <fmt/format.h>

#include <cmath>

#include "io/csv.h"

namespace hfta {

const std::vector<std::string>& metrics_columns() {
  static const std::vector<std::string> columns = {"model", "step", "epoch", "lr", "loss"};
  return columns;
}

std::vector<std::string> metrics_row(int64_t model, int64_t step, int64_t epoch, float lr,
                                     float loss) {
  return {std::to_string(model), std::to_string(step), std::to_string(epoch),
          fmt::format("{:g}", lr), fmt::format("{:.6g}", loss)};
}

void write_summary(const TrainOptions& o, const HyperValues& values,
                   const std::vector<ModelResult>& results) {
  std::vector<std::string> header = {"model", "mode", "optimizer"};
  for (const HyperRow& row : hyper_table()) header.emplace_back(row.name);
  header.insert(header.end(),
                {"epochs", "batch_size", "seed", "train_loss", "test_loss", "test_accuracy",
                 "skipped_steps", "wall_seconds", "test_miou", "state_crc32"});
  CsvWriter summary(o.out + "/summary.csv", header);
  for (const ModelResult& r : results) {
    std::vector<std::string> fields = {std::to_string(r.model), o.serial ? "serial" : "fused",
                                       o.optimizer};
    for (const HyperRow& row : hyper_table()) {
      auto it = values.find(std::string(row.name));
      fields.push_back(it == values.end()
                           ? std::string()
                           : fmt::format("{:g}", it->second[static_cast<size_t>(r.model)]));
    }
    fields.insert(fields.end(),
                  {std::to_string(o.epochs), std::to_string(o.batch_size), std::to_string(o.seed),
                   fmt::format("{:.6g}", r.final_train_loss), fmt::format("{:.6g}", r.test_loss),
                   fmt::format("{:.6g}", r.test_accuracy), std::to_string(r.skipped_steps),
                   fmt::format("{:.3f}", r.wall_seconds),
                   std::isnan(r.test_miou) ? std::string() : fmt::format("{:.6g}", r.test_miou),
                   r.state_crc32_text()});
    summary.row(fields);
  }
}

}  // namespace hfta
