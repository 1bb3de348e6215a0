// `hfta train --model dcgan`: B DCGAN generator/discriminator pairs trained as one fused array
// (models/gan.h) by PyTorch's examples/dcgan step; `hfta trial --model dcgan` times those steps
// for `hfta sweep`.
#pragma once

#include "datasets/fashion_mnist.h"
#include "run/train.h"
#include "run/trial.h"

namespace hfta {

// Trains as the options say: --lr, --beta1 and --beta2 are per-model lists (defaults 0.0002,
// 0.5, 0.999: the example's) for G and D, --lr-d D's own learning rates (default: --lr);
// --dataset fashion-mnist (resized to --image-size, default 64, bilinear, scaled to [-1, 1]) or
// synthetic (3-channel random images, for throughput). Writes <out>/metrics.csv (model, epoch,
// step, loss_d, loss_g, d_x, d_g_z1, d_g_z2), at every epoch end
// <out>/samples/model<b>_epoch<e>.png (64 samples of model b from its fixed noise), and at the
// end <out>/summary.csv (each model's last step and last grid). Checkpoints as the classifier's
// (<out>/checkpoint.bin, serial: checkpoint-model<b>.bin; tasks/gan/gan_checkpoint.h) after
// every epoch, on Ctrl-C and with --checkpoint-every / --checkpoint-interval; --resume continues
// exactly. `stop_after_step` > 0 (tests) acts as a Ctrl-C arriving after that step.
TrainResult run_train_gan(const TrainOptions& options, int64_t stop_after_step = 0);

// Images in [-1, 1] at side x side of `split` of --dataset fashion-mnist (the example's
// Normalize(0.5, 0.5) after a bilinear resize) or synthetic (`synthetic_size` training images of
// 3 channels, a quarter as many test images).
Dataset gan_dataset(const std::string& dataset, const std::string& data_dir, int64_t side,
                    int64_t synthetic_size, uint64_t seed, Split split = Split::kTrain);

// One timed measurement of DCGAN steps (trial.h): B pairs fused, or each alone with `serial`, on
// batches of `batch_size` images of side `image_size` (default 64). Learning rates as
// run_trial's; samples_per_second counts real images per second over all models.
TrialResult run_gan_trial(const TrialOptions& options);

}  // namespace hfta
