#include "datasets/synthetic.h"

#include <cmath>

#include "core/arena.h"
#include "core/parallel.h"
#include "core/rng.h"

namespace hfta {
namespace {

// Seed mixes, so that the class means and each sample stream never share random numbers.
constexpr uint64_t kMeansMix = 0x6D65616E73000001ull;
constexpr uint64_t kSamplesMix = 0x73616D706C650001ull;

}  // namespace

Dataset make_synthetic(const Shape& sample_shape, int num_classes, int64_t size, uint64_t seed,
                       const SyntheticOptions& options) {
  HFTA_CHECK(sample_shape.rank() >= 1 && sample_shape.numel() >= 1,
             "synthetic sample shape {} must have at least one element", sample_shape.str());
  for (int64_t d : sample_shape)
    HFTA_CHECK(d >= 1, "synthetic sample shape {} has a dimension below 1", sample_shape.str());
  HFTA_CHECK(num_classes >= 1, "synthetic dataset needs at least 1 class, got {}", num_classes);
  HFTA_CHECK(size >= 1, "synthetic dataset needs at least 1 sample, got {}", size);
  HFTA_CHECK(options.noise_std >= 0.0f && std::isfinite(options.noise_std),
             "synthetic noise_std must be finite and >= 0, got {}", options.noise_std);

  const int64_t D = sample_shape.numel();
  // Refused before allocating: a size the machine cannot hold would end in std::bad_alloc (or the
  // kernel's OOM killer) with nothing said about which flag asked for it.
  const double needed = static_cast<double>(size) * static_cast<double>(D * sizeof(float) + 4);
  const size_t available = available_memory_bytes();
  HFTA_CHECK(needed <= static_cast<double>(available),
             "synthetic dataset of {} samples of shape {} needs {:.1f} GiB, but this machine has "
             "{:.1f} GiB available: lower --synthetic-size or --synthetic-test-size",
             size, sample_shape.str(), needed / (1 << 30),
             static_cast<double>(available) / (1 << 30));
  std::vector<float> means(static_cast<size_t>(num_classes * D));
  for (int c = 0; c < num_classes; ++c) {
    RngStream rng(seed ^ kMeansMix, static_cast<uint64_t>(c));
    for (int64_t j = 0; j < D; ++j) means[c * D + j] = rng.normal();
  }

  Dataset out;
  out.name = fmt::format("synthetic{}-c{}-seed{}-s{}", sample_shape.str(), num_classes, seed,
                         options.sample_stream);
  out.sample_shape = sample_shape;
  out.size = size;
  out.num_classes = num_classes;
  out.images.resize(static_cast<size_t>(size * D));
  out.labels.resize(static_cast<size_t>(size));
  const float noise = options.noise_std;
  const float scale = 1.0f / std::sqrt(1.0f + noise * noise);
  const uint64_t sample_seed = seed ^ (kSamplesMix * (options.sample_stream + 1));
  parallel_for(size, [&](int64_t i) {
    RngStream rng(sample_seed, static_cast<uint64_t>(i));
    const int32_t label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(num_classes)));
    out.labels[i] = label;
    const float* mean = means.data() + label * D;
    float* dst = out.images.data() + i * D;
    for (int64_t j = 0; j < D; ++j) dst[j] = (mean[j] + noise * rng.normal()) * scale;
  });
  return out;
}

}  // namespace hfta
