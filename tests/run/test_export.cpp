// `hfta export`: a model of a run, of a checkpoint or freshly initialized, as safetensors with
// PyTorch's state_dict names, shapes and layouts (read back here; benchmarks/torch_golden.py and
// torch_eval_export.py load such files into PyTorch), and the errors of bad exports.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "models/model.h"
#include "run/export.h"
#include "test_files.h"

namespace hfta {
namespace {

using test::expect_hfta_error;
using test::run_hfta;
using test::TempDir;

std::map<std::string, SafeTensor> by_name(const std::vector<SafeTensor>& tensors) {
  std::map<std::string, SafeTensor> out;
  for (const SafeTensor& t : tensors) out[t.name] = t;
  return out;
}

TEST(Export, SafetensorsRoundTripsAndRejectsBadFiles) {
  TempDir tmp("safetensors");
  const std::string path = tmp.str() + "/x.safetensors";
  std::vector<SafeTensor> tensors = {
      {.name = "w", .shape = {2, 3}, .floats = {1, 2, 3, 4, 5, 6}},
      {.name = "count", .shape = {}, .dtype = "I64", .integers = {42}},
      {.name = "b", .shape = {1}, .floats = {-0.5f}}};
  write_safetensors(path, tensors, {{"format", "pt"}});
  std::map<std::string, std::string> meta;
  auto back = by_name(read_safetensors(path, &meta));
  EXPECT_EQ(meta.at("format"), "pt");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back.at("w").floats, tensors[0].floats);
  EXPECT_EQ(back.at("w").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back.at("count").integers, (std::vector<int64_t>{42}));
  EXPECT_EQ(back.at("count").dtype, "I64");
  // The header length, then 8-byte aligned data: 6 + 1 floats and one int64 after it.
  const std::string bytes = test::read_file(path);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  EXPECT_EQ(header % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header + 7 * 4 + 8);

  std::ofstream(tmp.str() + "/truncated.safetensors", std::ios::binary)
      << bytes.substr(0, bytes.size() - 5);
  EXPECT_THROW(read_safetensors(tmp.str() + "/truncated.safetensors"), Error);
  std::ofstream(tmp.str() + "/junk.safetensors", std::ios::binary) << "not a safetensors file";
  EXPECT_THROW(read_safetensors(tmp.str() + "/junk.safetensors"), Error);
  EXPECT_THROW(write_safetensors(path, {{.name = "bad", .shape = {2}, .floats = {1}}}), Error);
}

TEST(Export, StateDictHasTorchvisionNamesShapesAndLayouts) {
  auto model = make_model("resnet18", {.B = 2, .batch_size = 2, .seed = 4});
  auto sd = by_name(state_dict(*model, 1));
  // torchvision.models.resnet18(num_classes=10): 62 parameters + 60 buffers.
  EXPECT_EQ(sd.size(), 122u);
  EXPECT_EQ(sd.at("fc.weight").shape, (std::vector<int64_t>{10, 512}));  // [out, in]
  EXPECT_EQ(sd.at("conv1.weight").shape, (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(sd.at("layer3.0.downsample.0.weight").shape, (std::vector<int64_t>{256, 128, 1, 1}));
  EXPECT_EQ(sd.at("layer1.0.bn1.running_var").floats, std::vector<float>(64, 1.0f));
  EXPECT_EQ(sd.at("bn1.num_batches_tracked").dtype, "I64");
  EXPECT_TRUE(sd.at("bn1.num_batches_tracked").shape.empty());
  // fc.weight[o][i] is the stored [in, out] weight's (i, o) of model 1.
  for (const Param& p : model->params())
    if (p.name == "fc.weight") {
      const TensorView w = p.value.replica(1);
      EXPECT_EQ(sd.at("fc.weight").floats[3 * 512 + 7], w[7 * 10 + 3]);
    }
  EXPECT_THROW(state_dict(*model, 2), Error);
}

// load_state_dict takes back what state_dict wrote, into any slot of any array of the same
// architecture (through a file, as a user's program loads an export), and refuses a state_dict
// of another shape without writing anything.
TEST(Export, LoadStateDictTakesBackAnExportIntoAnySlot) {
  TempDir tmp("load_state_dict");
  const std::string path = tmp.str() + "/model1.safetensors";
  for (const std::string name : {"mlp", "resnet18"}) {
    SCOPED_TRACE(name);
    auto from = make_model(name, {.B = 3, .batch_size = 2, .seed = 4});
    // Buffers that differ from their initial values (running statistics, counters).
    for (const ModelBuffer& buf : from->buffers()) {
      TensorView v = buf.value.replica(1);
      for (int64_t i = 0; i < v.numel(); ++i) v.data[i] = static_cast<float>(i % 7 + 2);
    }
    write_safetensors(path, state_dict(*from, 1));
    auto to = make_model(name, {.B = 2, .batch_size = 2, .seed = 9});
    const std::vector<float> untouched = to->extract(1);
    load_state_dict(*to, 0, read_safetensors(path), path);
    EXPECT_EQ(to->extract(0), from->extract(1));
    EXPECT_EQ(to->extract(1), untouched);
    const auto back = by_name(state_dict(*to, 0)), orig = by_name(state_dict(*from, 1));
    for (const auto& [n, t] : orig) {
      EXPECT_EQ(back.at(n).floats, t.floats) << n;
      EXPECT_EQ(back.at(n).integers, t.integers) << n;
    }
  }
  auto mlp = make_model("mlp", {.B = 1, .batch_size = 2, .seed = 1});
  const std::vector<float> before = mlp->extract(0);
  std::vector<SafeTensor> sd = state_dict(*mlp, 0);
  auto expect_refused = [&](const std::vector<SafeTensor>& bad, const std::string& mention) {
    try {
      load_state_dict(*mlp, 0, bad, "bad.safetensors");
      ADD_FAILURE() << "accepted a state_dict that should mention " << mention;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
    }
    EXPECT_EQ(mlp->extract(0), before);
  };
  std::vector<SafeTensor> bad = sd;
  bad.pop_back();
  expect_refused(bad, "missing " + sd.back().name);
  bad = sd;
  bad.push_back({.name = "fc9.weight", .shape = {1}, .floats = {0.0f}});
  expect_refused(bad, "unexpected fc9.weight");
  bad = sd;
  bad[0].shape = {bad[0].shape[1], bad[0].shape[0]};  // fc1.weight as stored here, not [out, in]
  expect_refused(bad, bad[0].name + " is F32");
  bad = sd;
  bad.push_back(sd[0]);
  expect_refused(bad, "appears twice");
  EXPECT_THROW(load_state_dict(*mlp, 1, sd, "x"), Error);
}

TEST(Export, CommandExportsAModelOfARunAndRejectsAMissingOne) {
  TempDir tmp("export_run");
  const std::string run = tmp.str() + "/run";
  auto r = run_hfta(
      "train --model lenet --dataset synthetic --synthetic-size 64 --lr 0.001,0.002 "
      "--epochs 1 --iters-per-epoch 2 --batch-size 16 --no-progress --out " +
      run);
  ASSERT_EQ(r.exit_code, 0) << r.output();
  const std::string file = tmp.str() + "/model1.safetensors";
  r = run_hfta("export --run " + run + " --model 1 --out " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output();
  auto sd = by_name(read_safetensors(file));
  EXPECT_EQ(sd.size(), 8u);  // conv1, conv2, fc1, fc2: weight and bias each
  EXPECT_EQ(sd.at("fc1.weight").shape, (std::vector<int64_t>{1024, 3136}));
  // The same values as model 1 of the run's checkpoint.
  Checkpoint c = load_checkpoint(run + "/checkpoint.bin");
  for (const CheckpointTensor& t : c.tensors)
    if (t.name == "2.conv2.weight") {
      const int64_t n = t.shape.numel_from(1);
      EXPECT_EQ(sd.at("conv2.weight").floats,
                std::vector<float>(t.values.begin() + n, t.values.begin() + 2 * n));
    }
  // From an extracted checkpoint too.
  r = run_hfta("extract --run " + run + " --model 1 --out " + tmp.str() + "/one.bin");
  ASSERT_EQ(r.exit_code, 0) << r.output();
  r = run_hfta("export --checkpoint " + tmp.str() + "/one.bin --out " + tmp.str() + "/one.st");
  ASSERT_EQ(r.exit_code, 0) << r.output();
  EXPECT_EQ(by_name(read_safetensors(tmp.str() + "/one.st")).at("fc2.bias").floats,
            sd.at("fc2.bias").floats);

  expect_hfta_error("export --run " + run + " --model 7 --out " + tmp.str() + "/x.st",
                    "not model 7");
  expect_hfta_error("export --checkpoint " + tmp.str() + "/one.bin --model 3 --out x.st",
                    "no model 3");
  expect_hfta_error("export --out x.st", "give --run DIR --model N, --checkpoint FILE, or --init");
  expect_hfta_error("export --init --out x.st", "--init needs --arch");
}

TEST(Export, BadModelsAndDataAreClearErrors) {
  TempDir tmp("bad_models");
  expect_hfta_error("train --model resnet9000 --out " + tmp.str(), "resnet9000");
  // A LeNet cannot take 2x2 images: its second pool has no output.
  try {
    make_model("lenet", {.B = 1, .batch_size = 2, .sample_shape = Shape{1, 2, 2}});
    ADD_FAILURE() << "lenet on 2x2 images should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MaxPool2d"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[1, 2, 2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_model("lenet", {.B = 1, .batch_size = 2, .sample_shape = Shape{784}}), Error);
  // CIFAR-10: a missing folder and a truncated batch name the files.
  expect_hfta_error("train --model resnet18 --dataset cifar10 --out " + tmp.str(),
                    "--dataset cifar10 needs --data-dir");
  const std::string cifar = tmp.str() + "/cifar";
  std::filesystem::create_directories(cifar);
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"})
    std::ofstream(cifar + "/" + name, std::ios::binary) << std::string(3073 * 2, '\1');
  std::ofstream(cifar + "/data_batch_3.bin", std::ios::binary) << std::string(3073 + 100, '\1');
  expect_hfta_error("train --model resnet18 --dataset cifar10 --data-dir " + cifar + " --out " +
                        tmp.str() + "/out",
                    "data_batch_3.bin");
}

}  // namespace
}  // namespace hfta
