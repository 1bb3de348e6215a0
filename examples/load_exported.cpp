// Loads a model exported by train_custom_cnn (or saved by PyTorch from the same module) into a
// one-model array and measures its test accuracy again:
//
//   load_exported MODEL.safetensors
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <string>

#include "common.h"
#include "custom_cnn.h"
#include "datasets/fashion_mnist.h"
#include "io/safetensors.h"
#include "run/export.h"

int main(int argc, char** argv) try {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} MODEL.safetensors\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const char* dir = std::getenv("HFTA_FASHION_MNIST");
  const hfta::Dataset test =
      hfta::load_fashion_mnist(dir ? dir : hfta::kFashionMnistDefaultDir, hfta::Split::kTest);
  hfta::Model model("custom_cnn", custom_cnn_spec(1, 64, /*seed=*/0), define_custom_cnn);
  hfta::load_state_dict(model, 0, hfta::read_safetensors(path), path);
  fmt::print("{}: test accuracy {:.4f}\n", path, test_accuracy(model, test)[0]);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "load_exported: error: {}\n", e.what());
  return 1;
}
