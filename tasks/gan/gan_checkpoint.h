// Checkpoints of a DCGAN array (`hfta train --model dcgan`), in the classifier's file format
// (checkpoint.h) so that `hfta extract` slices them and resume.h's paths and metrics pruning
// apply unchanged.
//
// The Checkpoint's model is "dcgan", its sample shape the images' [nc, S, S], its optimizer
// "adam", its hyper map lr, lr_d, beta1, beta2; optimizer_steps are G's Adam step counts. The
// fixed sample noise is not stored: it is drawn again from the seed. Tensors, every one [B, ...]:
//   g.<i>.<name>, g.<buffer>         G's parameters (recording order) and BatchNorm buffers
//   d.<i>.<name>, d.<buffer>         D's
//   g.<i>.<name>#state<s>, d.<i>.<name>#state<s>   Adam's m (s = 0) and v (s = 1)
//   d#steps                          [B, 1]: D's Adam step counts (they differ from G's only
//                                    where a NaN/Inf gradient skipped one network's step)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "io/checkpoint.h"
#include "models/gan.h"
#include "run/hyper.h"
#include "tasks/classifier/resume.h"

namespace hfta {

// The GAN array, its optimizers and progress into `c` (reusing its tensors' vectors). `hyper`:
// the array's own lr, lr_d, beta1, beta2 (B values each). With `values` false only names and
// sizes the tensors (a periodic checkpoint's buffer, allocated ahead).
void fill_gan_checkpoint(Checkpoint& c, const GanArray& gan, const HyperValues& hyper,
                         const ArrayProgress& progress, int64_t batch_size, bool values = true);

// Copies the tensors, optimizer state and step count back into `gan`; returns the progress.
// Throws hfta::Error naming the first tensor that differs in name or shape.
ArrayProgress restore_gan_checkpoint(const Checkpoint& c, GanArray& gan);

// Throws hfta::Error naming the first setting of this run (`hyper`: the array's own values, ids,
// image shape, seed, batch) that differs from the checkpoint at `path`.
void check_gan_resumable(const Checkpoint& c, const GanSpec& spec, const HyperValues& hyper,
                         int64_t epochs, const std::string& path);

// One network of model 0 of a B = 1 DCGAN checkpoint (extract_model's output) as a Net with its
// trained parameters and buffers, ready for state_dict() (export).
std::unique_ptr<Net> dcgan_net_from_checkpoint(const Checkpoint& c, DcganNet which);

// The noise of `hfta eval` (its own purpose: neither a training step's nor the sample grids').
inline constexpr uint64_t kRngGanEvalNoise = 103;

// `hfta eval` of a DCGAN checkpoint: per model, the example's statistics on `test`'s images (its
// test split) and as many samples of G, every network in evaluation mode (BatchNorm's running
// statistics), in batches of `batch` rows: D's loss (BCE on the real images as real plus on the
// samples as fake), G's loss (BCE on the samples as real), and D's mean output on each.
struct GanEvaluation {
  int64_t images = 0;
  std::vector<double> loss_d, loss_g, d_x, d_g_z;
};
GanEvaluation evaluate_gan_checkpoint(const Checkpoint& c, const Dataset& test, int64_t batch);

}  // namespace hfta
