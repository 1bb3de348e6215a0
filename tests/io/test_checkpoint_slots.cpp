// Checkpoints of arrays with a refilled slot: Net::forward_origins() (where a refilled model's
// dropout count starts) is saved and restored, so a resumed array draws the same dropout masks
// as one never stopped; files without the field (older ones) load as all zeros.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "datasets/loader.h"
#include "datasets/synthetic.h"
#include "io/checkpoint.h"
#include "models/model.h"
#include "test_files.h"

namespace hfta {
namespace {

using test::TempDir;

// Dropout after the hidden layer: its masks depend on each model's count of training forwards.
Value define_mlp_dropout(Net& n, Value images, int64_t num_classes) {
  Value h = n.dropout(n.relu(n.linear(images, "fc1", {.out_features = 32})), 0.3f);
  return n.linear(h, "fc2", {.out_features = num_classes});
}

std::unique_ptr<Model> make(std::vector<int64_t> ids) {
  ModelSpec spec{.B = static_cast<int64_t>(ids.size()),
                 .batch_size = 8,
                 .seed = 11,
                 .model_ids = std::move(ids),
                 .sample_shape = Shape{1, 28, 28},
                 .num_classes = 10};
  return std::make_unique<Model>("mlp_dropout", spec, define_mlp_dropout);
}

Checkpoint checkpoint_of(const Model& m) {
  Checkpoint c;
  c.model = m.name();
  c.sample_shape = {1, 28, 28};
  c.num_classes = 10;
  c.B = m.B();
  c.seed = 11;
  c.batch_size = 8;
  c.model_ids = m.spec().model_ids;
  c.optimizer = "none";
  c.step = m.net().training_forwards();
  c.epoch_loss_sum.assign(static_cast<size_t>(m.B()), 0.0);
  c.last_train_loss.assign(static_cast<size_t>(m.B()), 0.0);
  c.optimizer_steps.assign(static_cast<size_t>(m.B()), 0);
  c.skipped_steps.assign(static_cast<size_t>(m.B()), 0);
  c.forward_origins = m.net().forward_origins();
  c.tensors = capture_tensors(m, nullptr);
  return c;
}

TEST(CheckpointSlots, ARefilledSlotResumesWithTheSameDropoutDraws) {
  TempDir tmp("ckpt_slots");
  auto live = make({0, 1});
  Dataset data = make_synthetic(live->sample_shape(), 10, 64, 3);
  Loader loader(data, {.batch_size = 8, .seed = 3});
  Batch batch = loader.make_batch();
  auto step = [&](Model& m) {
    if (!loader.next(batch)) loader.next(batch);
    m.train_step(batch.images(), batch.labels());
  };
  for (int i = 0; i < 3; ++i) step(*live);
  live->reinit_slot(1, 7);  // slot 1 counts its dropout draws from forward 3
  for (int i = 0; i < 2; ++i) step(*live);
  ASSERT_EQ(live->net().forward_origins(), (std::vector<int64_t>{0, 3}));

  const std::string path = tmp.str() + "/c.bin";
  save_checkpoint(path, checkpoint_of(*live));
  const Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.forward_origins, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(extract_model(loaded, 1).forward_origins, (std::vector<int64_t>{3}));

  auto resumed = make({0, 7});
  restore_tensors(loaded, *resumed, nullptr);
  EXPECT_EQ(resumed->net().forward_origins(), (std::vector<int64_t>{0, 3}));
  // Without the origins slot 1 would draw the masks of another count: the test can tell.
  Checkpoint old = loaded;
  old.forward_origins.clear();
  auto forgetful = make({0, 7});
  restore_tensors(old, *forgetful, nullptr);
  EXPECT_EQ(forgetful->net().forward_origins(), (std::vector<int64_t>{0, 0}));

  bool forgetful_differs = false;
  for (int i = 0; i < 3; ++i) {
    if (!loader.next(batch)) loader.next(batch);
    live->train_step(batch.images(), batch.labels());
    resumed->train_step(batch.images(), batch.labels());
    forgetful->train_step(batch.images(), batch.labels());
    for (int64_t b = 0; b < 2; ++b)
      EXPECT_EQ(resumed->losses()[b], live->losses()[b]) << "step " << i << " slot " << b;
    EXPECT_EQ(forgetful->losses()[0], live->losses()[0]);
    forgetful_differs |= forgetful->losses()[1] != live->losses()[1];
  }
  EXPECT_TRUE(forgetful_differs);
}

TEST(CheckpointSlots, FilesWithoutOriginsLoadAsZeros) {
  TempDir tmp("ckpt_slots_old");
  auto m = make({0, 1});
  Checkpoint c = checkpoint_of(*m);
  ASSERT_EQ(c.forward_origins, (std::vector<int64_t>{0, 0}));
  const std::string path = tmp.str() + "/c.bin";
  save_checkpoint(path, c);
  // All zeros are not written: the header is what files before the field held.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.find("forward_origins"), std::string::npos);
  const Checkpoint loaded = load_checkpoint(path);
  EXPECT_TRUE(loaded.forward_origins.empty());
  auto restored = make({0, 1});
  restored->net().set_forward_origins({5, 5});  // restore must set them, not keep these
  restore_tensors(loaded, *restored, nullptr);
  EXPECT_EQ(restored->net().forward_origins(), (std::vector<int64_t>{0, 0}));
}

}  // namespace
}  // namespace hfta
