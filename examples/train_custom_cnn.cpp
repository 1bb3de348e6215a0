// Trains an array of the custom CNN (custom_cnn.h) on Fashion-MNIST, one model per learning
// rate, with one fused Adam, then exports the most accurate model as safetensors:
//
//   train_custom_cnn STEPS OUT.safetensors LR [LR ...]
//   e.g. train_custom_cnn 300 best.safetensors 0.0003 0.001 0.003
//
// All models read the same minibatches; model b is the model that one learning rate would give
// trained alone. HFTA_FASHION_MNIST overrides the data folder (Debian's dataset-fashion-mnist).
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "common.h"
#include "custom_cnn.h"
#include "datasets/fashion_mnist.h"
#include "io/safetensors.h"
#include "optim/adam.h"
#include "run/export.h"

int main(int argc, char** argv) try {
  if (argc < 4) {
    fmt::print(stderr, "usage: {} STEPS OUT.safetensors LR [LR ...]\n", argv[0]);
    return 2;
  }
  const int64_t steps = std::stoll(argv[1]);
  const std::string out = argv[2];
  std::vector<float> lr;
  for (int i = 3; i < argc; ++i) lr.push_back(std::stof(argv[i]));
  const char* dir = std::getenv("HFTA_FASHION_MNIST");
  const std::string data_dir = dir ? dir : hfta::kFashionMnistDefaultDir;
  const hfta::Dataset train = hfta::load_fashion_mnist(data_dir, hfta::Split::kTrain);
  const hfta::Dataset test = hfta::load_fashion_mnist(data_dir, hfta::Split::kTest);

  const int64_t B = static_cast<int64_t>(lr.size()), batch_size = 64;
  hfta::Model model("custom_cnn", custom_cnn_spec(B, batch_size, /*seed=*/1), define_custom_cnn);
  // One Adam for the whole array: each model's learning rate, the rest shared.
  std::vector<hfta::TensorView> params;
  for (const hfta::Param& p : model.params()) params.push_back(p.value);
  hfta::FusedAdam adam(hfta::ParamTable::from_arena(model.param_arena(), params), {.lr = lr});

  hfta::Loader loader(train, {.batch_size = batch_size, .seed = 1});
  hfta::Batch batch = loader.make_batch();
  for (int64_t step = 1; step <= steps; ++step) {
    if (!loader.next(batch)) loader.next(batch);  // a new epoch
    model.train_step(batch.images(), batch.labels());
    adam.step(model.param_arena(), model.grad_arena());
    if (step % 100 == 0 || step == steps) {
      fmt::print("step {}: loss", step);
      for (float loss : model.losses()) fmt::print(" {:.4f}", loss);
      fmt::print("\n");
    }
  }
  const std::vector<double> accuracy = test_accuracy(model, test);
  int64_t best = 0;
  for (int64_t b = 0; b < B; ++b) {
    fmt::print("model {} (lr {}): test accuracy {:.4f}\n", b, lr[b], accuracy[b]);
    if (accuracy[b] > accuracy[best]) best = b;
  }
  hfta::write_safetensors(out, hfta::state_dict(model, best), {{"format", "pt"}});
  fmt::print("best model {}: test accuracy {:.4f}, exported to {}\n", best, accuracy[best], out);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "train_custom_cnn: error: {}\n", e.what());
  return 1;
}
