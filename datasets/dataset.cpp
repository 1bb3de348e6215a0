#include "datasets/dataset.h"

#include <algorithm>
#include <filesystem>

#include "core/arena.h"

namespace hfta {

Shape Dataset::images_shape() const {
  Shape s{size};
  for (int64_t d : sample_shape) s.push_back(d);
  return s;
}

void Dataset::check() const {
  HFTA_CHECK(size >= 1, "dataset '{}' is empty", name);
  HFTA_CHECK(sample_shape.rank() >= 1 && sample_numel() >= 1,
             "dataset '{}' has sample shape {}, expected at least one element per sample", name,
             sample_shape.str());
  HFTA_CHECK(num_classes >= 1, "dataset '{}' has {} classes, expected at least 1", name,
             num_classes);
  HFTA_CHECK(static_cast<int64_t>(images.size()) == size * sample_numel(),
             "dataset '{}' holds {} image values, expected {} samples x {} = {}", name,
             images.size(), size, sample_numel(), size * sample_numel());
  HFTA_CHECK(
      labels_per_sample >= 1 && static_cast<int64_t>(labels.size()) == size * labels_per_sample,
      "dataset '{}' holds {} labels for {} samples of {} label(s)", name, labels.size(), size,
      labels_per_sample);
  for (int64_t i = 0; i < size * labels_per_sample; ++i)
    HFTA_CHECK(labels[i] >= 0 && labels[i] < num_classes,
               "dataset '{}' sample {} has label {}, expected 0 to {}", name, i / labels_per_sample,
               labels[i], num_classes - 1);
}

Dataset take_first(const Dataset& data, int64_t n) {
  HFTA_CHECK(n >= 1, "cannot take {} samples of dataset '{}': ask for at least 1", n, data.name);
  Dataset out;
  out.size = std::min(n, data.size);
  out.name = out.size == data.size ? data.name : fmt::format("{}[:{}]", data.name, out.size);
  out.sample_shape = data.sample_shape;
  out.num_classes = data.num_classes;
  out.images.assign(data.images.begin(), data.images.begin() + out.size * data.sample_numel());
  out.labels_per_sample = data.labels_per_sample;
  out.labels.assign(data.labels.begin(), data.labels.begin() + out.size * data.labels_per_sample);
  return out;
}

void check_file_fits_in_memory(const std::string& path, const std::string& description) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  HFTA_CHECK(!ec, "cannot read {} '{}': {}", description, path, ec.message());
  const size_t available = available_memory_bytes();
  HFTA_CHECK(size <= available,
             "{} '{}' is {} bytes, more than the {} bytes of memory available to hold it",
             description, path, size, available);
}

}  // namespace hfta
