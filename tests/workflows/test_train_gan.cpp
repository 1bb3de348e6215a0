// `hfta train --model dcgan`: metrics per model and step, sample grids per model and epoch, the
// bilinear resize of the data, and the error for unsupported options.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "test_files.h"
#include "workflows/csv.h"
#include "workflows/data.h"
#include "workflows/png.h"
#include "workflows/train_gan.h"

namespace hfta {
namespace {

using test::TempDir;

TEST(TrainGan, SyntheticRunWritesMetricsAndSampleGrids) {
  TempDir tmp("train_gan");
  TrainOptions o;
  o.model = "dcgan";
  o.dataset = "synthetic";
  o.synthetic_train_size = 8;
  o.batch_size = 4;
  o.iters_per_epoch = 2;
  o.epochs = 2;
  o.hyper["lr"] = {1e-4f, 2e-4f};
  o.out = tmp.str();
  const TrainResult r = run_train(o);  // dispatches to run_train_gan
  EXPECT_EQ(r.B, 2);
  const CsvTable m = read_csv(tmp.str() + "/metrics.csv");
  EXPECT_EQ(m.header, (std::vector<std::string>{"model", "epoch", "step", "loss_d", "loss_g", "d_x",
                                                "d_g_z1", "d_g_z2"}));
  EXPECT_EQ(m.rows.size(), 2u * 2u * 2u);  // models x epochs x steps
  for (int b = 0; b < 2; ++b)
    for (int e = 0; e < 2; ++e) {
      const std::string png = fmt::format("{}/samples/model{}_epoch{}.png", tmp.str(), b, e);
      const std::string bytes = test::read_file(png);
      ASSERT_GT(bytes.size(), 8u) << png;
      EXPECT_EQ(bytes.substr(1, 3), "PNG") << png;
    }
}

TEST(TrainGan, RejectsResumeAndOtherHyperparameters) {
  TempDir tmp("train_gan_errors");
  TrainOptions o;
  o.model = "dcgan";
  o.dataset = "synthetic";
  o.out = tmp.str();
  o.resume = true;
  EXPECT_THROW(run_train_gan(o), Error);
  o.resume = false;
  o.hyper["weight_decay"] = {0.1f};
  EXPECT_THROW(run_train_gan(o), Error);
}

// PyTorch: F.interpolate(torch.tensor([[[[0., 1.]]]]), size=(1, 4), mode="bilinear",
// align_corners=False) = [0, 0.25, 0.75, 1].
TEST(ResizeImages, BilinearWithHalfPixelCenters) {
  Dataset d{.name = "t", .sample_shape = Shape{1, 1, 2}, .size = 1, .num_classes = 1};
  d.images = {0.0f, 1.0f};
  d.labels = {0};
  const Dataset r = resize_images(d, 4);
  EXPECT_EQ(r.sample_shape, (Shape{1, 4, 4}));
  for (int y = 0; y < 4; ++y) {
    EXPECT_FLOAT_EQ(r.images[static_cast<size_t>(y * 4 + 0)], 0.0f);
    EXPECT_FLOAT_EQ(r.images[static_cast<size_t>(y * 4 + 1)], 0.25f);
    EXPECT_FLOAT_EQ(r.images[static_cast<size_t>(y * 4 + 2)], 0.75f);
    EXPECT_FLOAT_EQ(r.images[static_cast<size_t>(y * 4 + 3)], 1.0f);
  }
}

TEST(PngGrid, RejectsTwoChannelImages) {
  TempDir tmp("png");
  std::vector<float> x(2 * 2 * 4 * 4, 0.0f);
  EXPECT_THROW(write_png_grid(tmp.str() + "/a.png", TensorView(x.data(), Shape{2, 2, 4, 4})),
               Error);
}

}  // namespace
}  // namespace hfta
