#include "workflows/train_gan.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <numeric>

#include "backend/cpu/runtime.h"
#include "core/error.h"
#include "datasets/fashion_mnist.h"
#include "datasets/loader.h"
#include "models/gan.h"
#include "workflows/csv.h"
#include "workflows/data.h"
#include "workflows/hyper.h"
#include "workflows/png.h"

namespace hfta {

namespace {

constexpr int64_t kImage = 64;  // the example's --imageSize

// The training images in [-1, 1] at kImage x kImage.
Dataset gan_dataset(const TrainOptions& o) {
  if (o.dataset == "synthetic")
    return load_data("synthetic", "", Shape{3, kImage, kImage}, 1, o.synthetic_train_size, 1,
                     o.seed)
        .train;
  HFTA_CHECK(o.dataset == "fashion-mnist",
             "--model dcgan trains on --dataset fashion-mnist or synthetic, not {}", o.dataset);
  Dataset d =
      load_fashion_mnist(o.data_dir.empty() ? kFashionMnistDefaultDir : o.data_dir, Split::kTrain);
  // Undo the classifier normalization: pixels p in [0, 1], then 2p - 1 (the example's
  // Normalize(0.5, 0.5)).
  for (float& x : d.images) x = 2.0f * (x * kFashionMnistStd + kFashionMnistMean) - 1.0f;
  return resize_images(d, kImage);
}

std::vector<float> hyper_list(const TrainOptions& o, const std::string& name, float fallback,
                              int64_t B) {
  auto it = o.hyper.find(name);
  if (it == o.hyper.end()) return std::vector<float>(static_cast<size_t>(B), fallback);
  return expand_per_model(it->second, B, "--" + name);
}

}  // namespace

TrainResult run_train_gan(const TrainOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  HFTA_CHECK(o.epochs >= 1, "--epochs must be at least 1, got {}", o.epochs);
  HFTA_CHECK(o.batch_size >= 2, "--batch-size must be at least 2 for a GAN, got {}", o.batch_size);
  HFTA_CHECK(o.iters_per_epoch >= 0, "--iters-per-epoch must be >= 0, got {}", o.iters_per_epoch);
  HFTA_CHECK(!o.resume, "--model dcgan has no checkpoints yet: run without --resume");
  HFTA_CHECK(o.optimizer == "adam", "--model dcgan trains with Adam (the example's), not {}",
             o.optimizer);
  for (const auto& [name, values] : o.hyper)
    HFTA_CHECK(name == "lr" || name == "beta1" || name == "beta2",
               "--model dcgan reads --lr, --beta1 and --beta2 only, not --{}", name);
  if (o.threads > 0) cpu::set_num_threads(o.threads);
  const int64_t B = array_size(o.hyper);
  AdamHyper adam;
  adam.lr = hyper_list(o, "lr", 2e-4f, B);
  adam.beta1 = hyper_list(o, "beta1", 0.5f, B);
  adam.beta2 = hyper_list(o, "beta2", 0.999f, B);
  adam.check();

  const Dataset data = gan_dataset(o);
  std::error_code ec;
  std::filesystem::create_directories(o.out + "/samples", ec);
  HFTA_CHECK(!ec, "cannot create {}/samples: {}", o.out, ec.message());
  CsvWriter metrics(o.out + "/metrics.csv",
                    {"model", "epoch", "step", "loss_d", "loss_g", "d_x", "d_g_z1", "d_g_z2"});

  std::vector<std::vector<int64_t>> groups;
  if (o.serial) {
    for (int64_t b = 0; b < B; ++b) groups.push_back({b});
  } else {
    groups.emplace_back(static_cast<size_t>(B));
    std::iota(groups[0].begin(), groups[0].end(), 0);
  }
  fmt::print("{}\n", cpu::describe_runtime());
  fmt::print(
      "training {} DCGAN{} ({}) on {}: {} images of {}, batch {}, {} epoch{}{}\n", B,
      B == 1 ? "" : "s", o.serial ? "serial" : "fused", o.dataset, data.size,
      data.sample_shape.str(), o.batch_size, o.epochs, o.epochs == 1 ? "" : "s",
      o.iters_per_epoch ? fmt::format(", at most {} steps per epoch", o.iters_per_epoch) : "");
  std::fflush(stdout);

  TrainResult result;
  result.B = B;
  result.models.resize(static_cast<size_t>(B));
  for (const std::vector<int64_t>& ids : groups) {
    const auto group_start = std::chrono::steady_clock::now();
    GanSpec spec{.arch = {.nc = data.sample_shape[0], .image = kImage},
                 .B = static_cast<int64_t>(ids.size()),
                 .batch = o.batch_size,
                 .seed = o.seed,
                 .model_ids = ids};
    for (int64_t id : ids) {
      const size_t i = static_cast<size_t>(id);
      spec.g_adam.lr.push_back(adam.lr[i]);
      spec.g_adam.beta1.push_back(adam.beta1[i]);
      spec.g_adam.beta2.push_back(adam.beta2[i]);
    }
    spec.g_adam.lr.erase(spec.g_adam.lr.begin());  // drop AdamHyper's single default
    spec.g_adam.beta1.erase(spec.g_adam.beta1.begin());
    spec.g_adam.beta2.erase(spec.g_adam.beta2.begin());
    spec.d_adam = spec.g_adam;
    GanArray gan(spec);
    Loader loader(
        data, {.batch_size = o.batch_size, .seed = o.seed, .iters_per_epoch = o.iters_per_epoch});
    Batch batch = loader.make_batch();
    const DcganArch& a = gan.spec().arch;
    std::vector<double> sum_g(ids.size());
    for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
      std::fill(sum_g.begin(), sum_g.end(), 0.0);
      int64_t steps = 0;
      while (loader.next(batch)) {
        const GanStepStats s = gan.step(batch.images());
        for (size_t k = 0; k < ids.size(); ++k) {
          metrics.row({std::to_string(ids[k]), std::to_string(epoch), std::to_string(gan.steps()),
                       fmt::format("{:.6g}", s.loss_d[k]), fmt::format("{:.6g}", s.loss_g[k]),
                       fmt::format("{:.6g}", s.d_x[k]), fmt::format("{:.6g}", s.d_g_z1[k]),
                       fmt::format("{:.6g}", s.d_g_z2[k])});
          sum_g[k] += s.loss_g[k];
        }
        if (gan.steps() % 50 == 0 || steps == 0) {
          fmt::print("epoch {} step {}: loss_d {:.4f} loss_g {:.4f} (model {})\n", epoch,
                     gan.steps(), s.loss_d[0], s.loss_g[0], ids[0]);
          std::fflush(stdout);
        }
        ++steps;
      }
      const TensorView grid = gan.samples();  // [64, B*nc, S, S]
      const int64_t rows = grid.shape[0], per = a.nc * a.image * a.image;
      std::vector<float> one(static_cast<size_t>(rows * per));
      for (size_t k = 0; k < ids.size(); ++k) {
        for (int64_t r = 0; r < rows; ++r)
          std::copy_n(
              grid.data + (r * static_cast<int64_t>(ids.size()) + static_cast<int64_t>(k)) * per,
              per, one.data() + r * per);
        write_png_grid(fmt::format("{}/samples/model{}_epoch{}.png", o.out, ids[k], epoch),
                       TensorView(one.data(), Shape{rows, a.nc, a.image, a.image}));
        result.models[static_cast<size_t>(ids[k])].final_train_loss =
            steps > 0 ? sum_g[k] / static_cast<double>(steps) : 0.0;
      }
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - group_start).count();
    for (int64_t id : ids) {
      result.models[static_cast<size_t>(id)].model = id;
      result.models[static_cast<size_t>(id)].wall_seconds = secs;
    }
  }
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("done in {:.1f} s: {}/metrics.csv and {}/samples/\n", result.wall_seconds, o.out,
             o.out);
  return result;
}

}  // namespace hfta
