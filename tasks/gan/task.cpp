// The GAN task (models/gan.h; trained by train_gan.cpp): its flags, `hfta eval` and `hfta export`
// of its checkpoints. A GAN has no metric that ranks its models: its losses measure each
// generator against its own discriminator.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "io/checkpoint.h"
#include "models/gan.h"
#include "run/data.h"
#include "run/export.h"
#include "tasks/gan/gan_checkpoint.h"
#include "tasks/gan/train_gan.h"
#include "tasks/tasks.h"

namespace hfta {

namespace {

// Samples are drawn for evaluation in batches of this many rows.
constexpr int64_t kEvalRows = 256;

std::string write_gan_export(const Net& net, const std::string& which,
                             const std::vector<int64_t>& sample_shape, const std::string& out,
                             const std::string& source) {
  write_safetensors(out, state_dict(net, 0),
                    {{"format", "pt"},
                     {"hfta_model", "dcgan_" + which},
                     {"sample_shape", fmt::format("[{}]", fmt::join(sample_shape, ", "))},
                     {"source", source}});
  return fmt::format("dcgan {} ({}) written to {}: {} parameter and {} buffer values", which,
                     source, out, net.params_per_model(), net.buffers_per_model());
}

DcganNet which_net(const std::string& net) {
  HFTA_CHECK(net == "g" || net == "d", "--net {}: a DCGAN's networks are g and d", net);
  return net == "d" ? DcganNet::kDiscriminator : DcganNet::kGenerator;
}

class GanTask final : public Task {
 public:
  std::string_view kind() const override { return "GAN"; }
  std::vector<std::string> model_names() const override { return {"dcgan"}; }

  bool reads_flag(const std::string&, std::string_view flag) const override {
    return flag == "--lr-d" || flag == "--image-size" || flag == "--synthetic-size" ||
           flag == "--device";  // every DCGAN op has a CUDA kernel (docs/cuda.md)
  }

  std::optional<TaskMetric> primary_metric(const std::string&) const override { return {}; }

  std::optional<std::string> tune_metric(const std::string& model,
                                         std::string* why_not) const override {
    if (why_not != nullptr)
      *why_not = fmt::format(
          "hfta tune cannot search {}: a GAN has no validation metric to rank trials by (its "
          "losses measure the generator against its own discriminator); sweep its learning rates "
          "with `hfta train --model {} --lr a,b,c` and compare the sample grids",
          model, model);
    return {};
  }

  TrainResult train(const TrainOptions& o) const override { return run_train_gan(o); }
  TrialResult trial(const TrialOptions& o) const override { return run_gan_trial(o); }

  EvalReport evaluate(const Checkpoint& c, const std::string& path,
                      const EvalOptions& options) const override {
    HFTA_CHECK(options.text_files.empty(), "--text-files: {} holds a DCGAN, which reads no text",
               path);
    HFTA_CHECK(c.sample_shape.size() == 3, "{}: a DCGAN checkpoint without image sizes", path);
    HFTA_CHECK(options.device == "cpu",
               "--device {}: hfta eval scores a DCGAN checkpoint on the CPU (train on the GPU, "
               "evaluate here: the checkpoint is the same file)",
               options.device);
    std::string dataset = options.dataset, data_dir = options.data_dir;
    if (dataset.empty()) {
      dataset = c.dataset.empty() ? "fashion-mnist" : c.dataset;
      if (data_dir.empty()) data_dir = c.data_dir;
    }
    // Synthetic images are drawn from the seed: `hfta train`'s default size.
    const Dataset test = gan_dataset(dataset, data_dir, c.sample_shape[1],
                                     TrainOptions{}.synthetic_train_size, c.seed, Split::kTest);
    const GanEvaluation e = evaluate_gan_checkpoint(c, test, kEvalRows);
    EvalReport report{.data = fmt::format("{} test images of {} and as many samples of each "
                                          "generator",
                                          e.images, dataset)};
    for (int64_t b = 0; b < c.B; ++b)
      report.model_metrics.push_back(
          fmt::format("loss D {:.4f}  loss G {:.4f}  D(x) {:.4f}  D(G(z)) {:.4f}", e.loss_d[b],
                      e.loss_g[b], e.d_x[b], e.d_g_z[b]));
    return report;
  }

  std::string export_model(const Checkpoint& one, const ExportOptions& options) const override {
    auto net = dcgan_net_from_checkpoint(one, which_net(options.net));
    return write_gan_export(*net, options.net, one.sample_shape, options.out, options.source);
  }

  std::string export_init(const InitExportOptions& o) const override {
    DcganArch arch;
    if (!o.sample_shape.empty()) {
      HFTA_CHECK(o.sample_shape.size() == 3 && o.sample_shape[1] == o.sample_shape[2],
                 "--sample-shape for dcgan is C,S,S (square images), got {}",
                 fmt::join(o.sample_shape, ","));
      arch.nc = o.sample_shape[0];
      arch.image = o.sample_shape[1];
    }
    const DcganNet which = which_net(o.net);
    Net net(NetSpec{.B = 1, .capacity = 2, .seed = dcgan_seed(o.seed, which)});
    if (which == DcganNet::kGenerator) {
      net.add_output_grad(dcgan_generator(net, net.model_input({arch.nz, 1, 1}), arch));
    } else {
      net.bce_with_logits(
          dcgan_discriminator(net, net.input({arch.nc, arch.image, arch.image}), arch), 1.0f);
    }
    net.finalize();
    return write_gan_export(net, o.net, {arch.nc, arch.image, arch.image}, o.out,
                            fmt::format("initial weights, seed {}", o.seed));
  }
};

}  // namespace

const Task& gan_task() {
  static const GanTask task;
  return task;
}

}  // namespace hfta
