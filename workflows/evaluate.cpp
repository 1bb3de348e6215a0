#include "workflows/evaluate.h"

#include "datasets/loader.h"
#include "models/model.h"

namespace hfta {

Evaluation evaluate(Model& model, const Dataset& test) {
  Loader loader(test,
                {.batch_size = model.spec().batch_size, .shuffle = false, .drop_last = false});
  Batch batch = loader.make_batch();
  const size_t B = static_cast<size_t>(model.B());
  std::vector<double> loss_sum(B, 0.0);
  std::vector<int64_t> correct(B, 0);
  int64_t rows = 0;
  while (loader.next(batch)) {
    model.forward(batch.images(), batch.labels(), /*training=*/false);
    std::vector<int64_t> c = model.correct();
    for (size_t b = 0; b < B; ++b) {
      loss_sum[b] += static_cast<double>(model.losses()[b]) * static_cast<double>(batch.rows);
      correct[b] += c[b];
    }
    rows += batch.rows;
  }
  Evaluation e;
  for (size_t b = 0; b < B; ++b) {
    e.loss.push_back(loss_sum[b] / static_cast<double>(rows));
    e.accuracy.push_back(static_cast<double>(correct[b]) / static_cast<double>(rows));
  }
  return e;
}

}  // namespace hfta
