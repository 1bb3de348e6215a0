// DCGAN as a fused array: B generators and B discriminators (PyTorch's examples/dcgan), model b of
// each paired, trained by the example's step with per-model Adam.
//
// Nets. The generator G is one Net (per-model noise in, [nc, S, S] per model out, its output
// gradient written by the caller). The discriminator is three Nets recorded by the same code:
// d_real owns the parameters and reads the shared minibatch (target 1); d_fake reads G's samples
// (target 0, no input gradient: fake.detach()); d_gen reads them again with target 1 and returns
// the gradient at its input, which becomes G's output gradient. d_fake and d_gen hold no state:
// their parameters, gradients and BatchNorm statistics are d_real's (Net::bind_state), so the
// D step accumulates the real and fake gradients into one arena, as PyTorch's two backward calls.
//
// Equivalence: G's and D's weights come from (seed, model id) init streams (D's seed is
// dcgan_seed(seed, kDiscriminator)), the noise of step t from (seed ^ t, model id), so model b of
// an array trains exactly as the same model alone.
//
// Execution plans (models/plan.h): under a plan other than fused, G and D hold only the state
// (parameters, gradients, buffers) of all B models, and each group of the plan runs the whole
// step (D's passes, D's update, G's pass, G's update) on its own four nets bound to its models'
// slices of that state, a thread's groups one after another, the threads side by side.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/device_memory.h"
#include "models/net.h"
#include "models/plan.h"
#include "optim/adam.h"

namespace hfta {

struct DcganArch {
  int64_t nz = 100;    // noise size
  int64_t ngf = 64;    // generator width
  int64_t ndf = 64;    // discriminator width
  int64_t nc = 3;      // image channels
  int64_t image = 64;  // image side: 8, 16, 32 or 64 (PyTorch's example: 64)

  // Throws hfta::Error unless the sizes are positive and image is 8, 16, 32 or 64.
  void check() const;
};

// PyTorch's Generator: z [nz, 1, 1] (per-model input) -> image [nc, S, S] in [-1, 1]. Parameters
// are named as the example's nn.Sequential ("main.0.weight", "main.1.weight", ...).
Value dcgan_generator(Net& n, Value z, const DcganArch& arch);
// PyTorch's Discriminator without its final Sigmoid: image [nc, S, S] -> one logit per row
// (kRows [1]); BCE-with-logits replaces Sigmoid + BCELoss.
Value dcgan_discriminator(Net& n, Value image, const DcganArch& arch);

enum class DcganNet { kGenerator, kDiscriminator };
// The init seed of each network: G uses `seed`, D a derived one, so that G's and D's first
// weights are not drawn from the same numbers.
uint64_t dcgan_seed(uint64_t seed, DcganNet which);

// RNG purposes of the GAN's noise (kept away from core/rng.h's list).
inline constexpr uint64_t kRngGanNoise = 101, kRngGanFixedNoise = 102;

struct GanSpec {
  DcganArch arch;
  int64_t B = 1;
  int64_t batch = 64;  // rows per step (the capacity of every net)
  uint64_t seed = 0;
  std::vector<int64_t> model_ids;  // empty: 0..B-1
  AdamHyper g_adam, d_adam;        // per-model lists (1 or B values)
  ExecutionPlan plan;              // not auto (workflows resolve it first)
  int threads = 0;                 // the plan's thread count (0: every thread)
  // Where the nets' arenas live and run (NetSpec::device). kCuda runs plan fused only; the real
  // batches and the noise are drawn or read on the host and uploaded once per step, the step's
  // statistics and samples() copied back.
  Device device = Device::kCpu;
};

// Per-model statistics of one step, as PyTorch's example prints them.
struct GanStepStats {
  std::vector<float> loss_d;  // errD_real + errD_fake
  std::vector<float> loss_g;  // errG
  std::vector<float> d_x;     // mean D(x) on the real batch
  std::vector<float> d_g_z1;  // mean D(G(z)) before the D step
  std::vector<float> d_g_z2;  // mean D(G(z)) after it
};

class GanArray {
 public:
  explicit GanArray(GanSpec spec);
  ~GanArray();

  int64_t B() const { return spec_.B; }
  // The spec, its plan resolved: fused when the layout amounts to one group.
  const GanSpec& spec() const { return spec_; }
  const PlanLayout& layout() const { return layout_; }
  // Bytes of every net's arenas: the state and each pass's activations.
  size_t arena_bytes() const;
  // FLOPs of a step per real row and model: D on the real rows, on the fakes and again for G
  // (forward and backward each), and G's forward and backward.
  double train_flops_per_row() const;
  // One step of PyTorch's example on a shared real batch [n, nc, S, S] (n <= batch). `noise`
  // [n, B*nz, 1, 1], when given, replaces the step's own draw (golden tests against PyTorch).
  GanStepStats step(const TensorView& real, const TensorView* noise = nullptr);
  // The noise of models [first, first + n) for z's rows into z [rows, n*nz, 1, 1], each model's
  // from its own stream (seed, model id, purpose).
  void draw_noise(TensorView z, uint64_t seed, uint64_t purpose, int64_t first = 0) const;
  // G's samples for the fixed noise (64 rows per model, drawn once): [64, B*nc, S, S], in host
  // memory. Runs G in training mode, as the example's netG(fixed_noise) does.
  TensorView samples();
  int64_t steps() const { return steps_; }
  // Restores the step count of a resumed run: step t's noise comes from (seed ^ t).
  void set_steps(int64_t steps) { steps_ = steps; }

  // Per-node timing of G and of D's three passes (HFTA_PROFILE=1, models/net.h).
  bool profiling() const;
  void reset_profile();
  std::string profile_report() const;

  Net& generator() { return *g_; }
  Net& discriminator() { return *d_real_; }
  FusedAdam& g_optimizer() { return *opt_g_; }
  FusedAdam& d_optimizer() { return *opt_d_; }
  const Net& generator() const { return *g_; }
  const Net& discriminator() const { return *d_real_; }
  const FusedAdam& g_optimizer() const { return *opt_g_; }
  const FusedAdam& d_optimizer() const { return *opt_d_; }

 private:
  // The nets that run one group's step (gan.cpp).
  struct Pass;
  std::unique_ptr<Pass> make_pass(int64_t first, int64_t count);
  void run_pass(Pass& p, const PlanGroup& group, const TensorView& real, const TensorView* noise,
                GanStepStats& stats);

  GanSpec spec_;
  PlanLayout layout_;
  // G's and D's state for all B models (and, under the fused plan, the nets that run it).
  std::unique_ptr<Net> g_, d_real_, g_sample_;
  Value sample_z_, sample_out_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<size_t> pass_of_group_;
  std::unique_ptr<FusedAdam> opt_g_, opt_d_;
  std::vector<float> fixed_noise_;
  int64_t steps_ = 0;
  // On a device: where the real batch, the step's noise and the fixed noise are uploaded to, and
  // the host copy of the samples.
  Arena device_inputs_;
  TensorView device_real_, device_noise_, device_fixed_noise_;
  StagedUpload real_upload_, noise_upload_;
  std::vector<float> host_samples_;
};

}  // namespace hfta
