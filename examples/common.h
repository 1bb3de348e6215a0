// What both examples do with a trained array: its test accuracy per model.
#pragma once

#include <vector>

#include "datasets/dataset.h"
#include "datasets/loader.h"
#include "models/model.h"

// Each model's share of correctly classified test images (evaluation mode, every image once).
inline std::vector<double> test_accuracy(hfta::Model& model, const hfta::Dataset& test) {
  hfta::Loader loader(
      test, {.batch_size = model.spec().batch_size, .shuffle = false, .drop_last = false});
  hfta::Batch batch = loader.make_batch();
  std::vector<int64_t> correct(static_cast<size_t>(model.B()), 0);
  int64_t seen = 0;
  while (loader.next(batch)) {
    model.forward(batch.images(), batch.labels(), /*training=*/false);
    for (int64_t b = 0; b < model.B(); ++b) correct[b] += model.correct()[b];
    seen += batch.rows;
  }
  std::vector<double> accuracy;
  for (int64_t c : correct) accuracy.push_back(static_cast<double>(c) / static_cast<double>(seen));
  return accuracy;
}
