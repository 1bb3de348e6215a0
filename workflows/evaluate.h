// Test loss and accuracy of every model of an array.
#pragma once

#include <vector>

#include "datasets/dataset.h"

namespace hfta {

class Model;

struct Evaluation {
  std::vector<double> loss, accuracy;  // per model; accuracy in [0, 1]
};

// One pass over `test` in batches of the model's batch size (the last one may be partial).
Evaluation evaluate(Model& model, const Dataset& test);

}  // namespace hfta
