// `hfta train --model dcgan`: B DCGAN generator/discriminator pairs trained as one fused array
// (models/gan.h) by PyTorch's examples/dcgan step.
#pragma once

#include "workflows/train.h"

namespace hfta {

// Trains as the options say: --lr, --beta1 and --beta2 are per-model lists shared by G and D
// (defaults 0.0002, 0.5, 0.999: the example's); --dataset fashion-mnist (resized to 64x64,
// bilinear, scaled to [-1, 1]) or synthetic (3x64x64 random images, for throughput). Writes
// <out>/metrics.csv (model, epoch, step, loss_d, loss_g, d_x, d_g_z1, d_g_z2) and, at every epoch
// end, <out>/samples/model<b>_epoch<e>.png: 64 samples of model b from its fixed noise.
// No checkpoints, resume or evaluation: throws hfta::Error on --resume.
TrainResult run_train_gan(const TrainOptions& options);

}  // namespace hfta
