#include "workflows/data.h"

#include <fmt/ranges.h>

#include "core/error.h"
#include "datasets/cifar10.h"
#include "datasets/fashion_mnist.h"
#include "datasets/synthetic.h"

namespace hfta {

std::vector<std::string> dataset_names() {
  return {"cifar10", "fashion-mnist", "synthetic", "text", "wikitext2"};
}

Data load_data(const std::string& dataset, const std::string& dir, const Shape& sample_shape,
               int64_t num_classes, int64_t train_size, int64_t test_size, uint64_t seed) {
  // Text corpora feed language models (workflows/train_lm.h), not classifiers.
  HFTA_CHECK(dataset != "text" && dataset != "wikitext2",
             "--dataset {} is text: train a language model on it (--model transformer)", dataset);
  if (dataset == "fashion-mnist") {
    std::string d = dir.empty() ? kFashionMnistDefaultDir : dir;
    return {load_fashion_mnist(d, Split::kTrain), load_fashion_mnist(d, Split::kTest)};
  }
  if (dataset == "cifar10") {
    HFTA_CHECK(!dir.empty(),
               "--dataset cifar10 needs --data-dir: the cifar-10-batches-bin folder of CIFAR-10's "
               "binary version (data_batch_1.bin ... data_batch_5.bin, test_batch.bin)");
    return {load_cifar10(dir, Split::kTrain), load_cifar10(dir, Split::kTest)};
  }
  HFTA_CHECK(dataset == "synthetic", "--dataset {} is not known: choose {}", dataset,
             fmt::join(dataset_names(), " or "));
  return {make_synthetic(sample_shape, static_cast<int>(num_classes), train_size, seed,
                         {.sample_stream = 0}),
          make_synthetic(sample_shape, static_cast<int>(num_classes), test_size, seed,
                         {.sample_stream = 1})};
}

}  // namespace hfta
