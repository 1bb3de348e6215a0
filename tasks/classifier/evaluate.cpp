#include "tasks/classifier/evaluate.h"

#include <numeric>

#include "core/error.h"
#include "datasets/loader.h"
#include "datasets/point_cloud.h"
#include "models/model.h"
#include "run/data.h"

namespace hfta {

Evaluation evaluate(Model& model, const Dataset& test, const PartTable* parts) {
  Loader loader(test,
                {.batch_size = model.spec().batch_size, .shuffle = false, .drop_last = false});
  Batch batch = loader.make_batch();
  const size_t B = static_cast<size_t>(model.B());
  const bool seg = model.task() == ModelTask::kSegment;
  const int64_t L = model.labels_per_sample(), P = model.num_classes();
  HFTA_CHECK(test.labels_per_sample == L,
             "{}: the test set '{}' has {} label(s) per sample, the model predicts {}",
             model.name(), test.name, test.labels_per_sample, L);
  // Segmentation: one class owning every part unless the data says otherwise.
  std::vector<std::vector<int32_t>> parts_of_class(1, std::vector<int32_t>(P));
  std::iota(parts_of_class[0].begin(), parts_of_class[0].end(), 0);
  const bool by_class = seg && parts != nullptr && !parts->parts_of_class.empty();
  if (by_class) {
    HFTA_CHECK(static_cast<int64_t>(parts->test_classes.size()) == test.size,
               "{}: {} shape classes for {} test shapes", model.name(), parts->test_classes.size(),
               test.size);
    parts_of_class = parts->parts_of_class;
  }
  std::vector<IouMeter> meters(seg ? B : 0, IouMeter(parts_of_class));
  std::vector<int32_t> pred(static_cast<size_t>(L));

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
    if (seg) {
      const TensorView logits = model.point_logits();  // [B, n, L, P]
      for (size_t b = 0; b < B; ++b)
        for (int64_t r = 0; r < batch.rows; ++r) {
          const int32_t cls = by_class ? parts->test_classes[static_cast<size_t>(rows + r)] : 0;
          const float* l = logits.data + ((static_cast<int64_t>(b) * batch.rows + r) * L * P);
          predict_class_parts({l, static_cast<size_t>(L * P)}, P,
                              parts_of_class[static_cast<size_t>(cls)], pred);
          meters[b].add(cls, pred, {batch.label_data.data() + r * L, static_cast<size_t>(L)});
        }
    }
    rows += batch.rows;
  }
  Evaluation e;
  for (size_t b = 0; b < B; ++b) {
    e.loss.push_back(loss_sum[b] / static_cast<double>(rows));
    e.accuracy.push_back(static_cast<double>(correct[b]) / static_cast<double>(rows * L));
    if (seg) e.miou.push_back(meters[b].instance_miou());
  }
  return e;
}

}  // namespace hfta
