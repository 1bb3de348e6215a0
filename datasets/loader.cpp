#include "datasets/loader.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "core/parallel.h"
#include "core/rng.h"

namespace hfta {

namespace {

Shape with_rows(int64_t rows, const Shape& sample_shape) {
  Shape s{rows};
  for (int64_t d : sample_shape) s.push_back(d);
  return s;
}

}  // namespace

TensorView Batch::images() { return TensorView(image_data.data(), with_rows(rows, sample_shape)); }

namespace {
Shape label_shape(int64_t rows, int64_t labels_per_sample) {
  return labels_per_sample == 1 ? Shape{rows} : Shape{rows, labels_per_sample};
}
}  // namespace

IndexView Batch::labels() {
  return IndexView(label_data.data(), label_shape(rows, labels_per_sample));
}

Loader::Loader(const Dataset& data, const LoaderOptions& options) : data_(data), options_(options) {
  data_.check();
  const int64_t N = options_.batch_size;
  HFTA_CHECK(N >= 1, "loader batch size must be at least 1, got {}", N);
  HFTA_CHECK(options_.iters_per_epoch >= 0,
             "loader iters_per_epoch must be >= 0 (0 means no cap), got {}",
             options_.iters_per_epoch);
  HFTA_CHECK(!options_.drop_last || data_.size >= N,
             "dataset '{}' has {} samples, fewer than the batch size {}: with drop_last an epoch "
             "would have no batch; lower the batch size or turn drop_last off",
             data_.name, data_.size, N);
  batches_per_epoch_ = options_.drop_last ? data_.size / N : (data_.size + N - 1) / N;
  if (options_.iters_per_epoch > 0)
    batches_per_epoch_ = std::min(batches_per_epoch_, options_.iters_per_epoch);
  start_epoch(0);
}

Batch Loader::make_batch() const {
  Batch b;
  b.capacity = options_.batch_size;
  b.sample_shape = data_.sample_shape;
  b.image_data.resize(static_cast<size_t>(b.capacity * data_.sample_numel()));
  b.labels_per_sample = data_.labels_per_sample;
  b.label_data.resize(static_cast<size_t>(b.capacity * b.labels_per_sample));
  return b;
}

int64_t Loader::samples_per_epoch() const {
  return std::min(batches_per_epoch_ * options_.batch_size, data_.size);
}

void Loader::start_epoch(int64_t epoch) {
  HFTA_CHECK(epoch >= 0, "loader epoch must be >= 0, got {}", epoch);
  epoch_ = epoch;
  batch_ = 0;
  order_.resize(static_cast<size_t>(data_.size));
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (!options_.shuffle) return;
  // Fisher-Yates from a stream that depends only on (seed, epoch).
  RngStream rng = RngStream::for_model(options_.seed, epoch, kRngData);
  for (int64_t i = data_.size - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(order_[i], order_[j]);
  }
}

int64_t Loader::next(const TensorView& images, const IndexView& labels) {
  const int64_t N = options_.batch_size;
  check_shape(images, with_rows(N, data_.sample_shape), "loader image buffer");
  const int64_t S = data_.labels_per_sample;
  check_shape(labels, label_shape(N, S), "loader label buffer");
  if (batch_ >= batches_per_epoch_) {
    start_epoch(epoch_ + 1);
    return 0;
  }
  const int64_t first = batch_ * N;
  const int64_t rows = std::min(N, data_.size - first);
  const int64_t D = data_.sample_numel();
  const int64_t* idx = order_.data() + first;
  parallel_for(rows, [&](int64_t r) {
    std::memcpy(images.data + r * D, data_.sample(idx[r]), static_cast<size_t>(D) * sizeof(float));
    std::copy_n(data_.labels.data() + idx[r] * S, S, labels.data + r * S);
  });
  ++batch_;
  return rows;
}

bool Loader::next(Batch& batch) {
  HFTA_CHECK(batch.capacity == options_.batch_size && batch.sample_shape == data_.sample_shape,
             "batch buffers hold {} rows of shape {}, the loader over '{}' needs {} rows of shape "
             "{}: create the batch with Loader::make_batch()",
             batch.capacity, batch.sample_shape.str(), data_.name, options_.batch_size,
             data_.sample_shape.str());
  HFTA_CHECK(
      static_cast<int64_t>(batch.image_data.size()) == batch.capacity * data_.sample_numel() &&
          batch.labels_per_sample == data_.labels_per_sample &&
          static_cast<int64_t>(batch.label_data.size()) == batch.capacity * data_.labels_per_sample,
      "batch buffers were resized after make_batch(): create the batch with "
      "Loader::make_batch() and leave its vectors' sizes alone");
  TensorView images(batch.image_data.data(), with_rows(batch.capacity, batch.sample_shape));
  IndexView labels(batch.label_data.data(), label_shape(batch.capacity, data_.labels_per_sample));
  batch.rows = next(images, labels);
  return batch.rows > 0;
}

}  // namespace hfta
