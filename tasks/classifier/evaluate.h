// Test loss and accuracy of every model of an array (and, for part segmentation, mean IoU).
#pragma once

#include <vector>

#include "datasets/dataset.h"

namespace hfta {

class Model;
struct PartTable;

struct Evaluation {
  std::vector<double> loss, accuracy;  // per model; accuracy in [0, 1] (of points: segmentation)
  // Segmentation models only (else empty): per model, the mean over the test shapes of each
  // shape's IoU (datasets/point_cloud.h shape_iou: the mean over its class's parts, a part
  // absent from both prediction and truth counting 1), predicting among the class's parts:
  // fxia22's / HFTA's shape mIoU.
  std::vector<double> miou;
};

// One pass over `test` in batches of the model's batch size (the last one may be partial).
// `parts` gives the classes' parts and the test shapes' classes for a segmentation model; without
// it (or empty) every shape counts as of one class owning every part.
Evaluation evaluate(Model& model, const Dataset& test, const PartTable* parts = nullptr);

}  // namespace hfta
