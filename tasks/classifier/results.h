// The CSV files of `hfta train`: <out>/metrics.csv (one row per model per step) and
// <out>/summary.csv (one row per model: its hyperparameters, one column per row of hyper_table(),
// and its final results).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "run/hyper.h"
#include "run/train.h"

namespace hfta {

// model, step, epoch, lr, loss.
const std::vector<std::string>& metrics_columns();
std::vector<std::string> metrics_row(int64_t model, int64_t step, int64_t epoch, float lr,
                                     float loss);

// Writes <out>/summary.csv. `values`: the run's resolved hyperparameters (a row the optimizer
// does not read leaves its column empty).
void write_summary(const TrainOptions& options, const HyperValues& values,
                   const std::vector<ModelResult>& results);

}  // namespace hfta
