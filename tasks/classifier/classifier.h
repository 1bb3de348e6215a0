// The classifier task (run/task.h): image and point-cloud classifiers and part segmentation
// (models/model.h), trained by the loop of train_loop.h.
#pragma once

#include "run/task.h"
#include "run/train.h"
#include "run/trial.h"

namespace hfta {

// `hfta train` of a classifier. Throws hfta::Error on bad options, missing data files or an
// unwritable --out.
TrainResult run_train_classifier(const TrainOptions& options);
// `hfta trial` of a classifier (trial.h).
TrialResult run_trial_classifier(const TrialOptions& options);

}  // namespace hfta
