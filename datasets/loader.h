// Minibatches over an in-memory Dataset. One batch feeds all B models of an array: the loader
// fills one [N, ...sample_shape] image buffer and one [N] label buffer per step, and every model
// reads those same buffers (never B copies).
//
// Epoch e visits the samples in the order of a Fisher-Yates shuffle drawn from (seed, e) alone,
// so the order does not depend on what happened before (a resumed run sees the same batches).
// With drop_last (the default, for training) every batch has exactly N rows and shapes stay
// fixed; without it (for evaluation) the last batch holds the remaining rows, and Batch::rows /
// the return value of next() say how many.
//
//   Loader loader(train, {.batch_size = 64, .seed = 7});
//   Batch batch = loader.make_batch();
//   for (int epoch = 0; epoch < 3; ++epoch)
//     while (loader.next(batch)) step(batch.images(), batch.labels());
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "datasets/dataset.h"

namespace hfta {

struct LoaderOptions {
  int64_t batch_size = 64;  // N
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = true;
  // K: at most this many batches per epoch; 0 means no cap.
  int64_t iters_per_epoch = 0;
};

// Caller-owned batch buffers, sized once for N rows by Loader::make_batch().
struct Batch {
  std::vector<float> image_data;    // N * sample_numel
  std::vector<int32_t> label_data;  // N * labels_per_sample
  Shape sample_shape;
  int64_t labels_per_sample = 1;  // the dataset's: 1, or one label per point
  int64_t capacity = 0;           // N
  int64_t rows = 0;  // rows filled by the last next(): N, or fewer in a final partial batch

  // [rows, ...sample_shape] and [rows] ([rows, labels_per_sample] when above 1): the part of the
  // buffers the last next() filled.
  TensorView images();
  IndexView labels();
};

class Loader {
 public:
  // `data` must outlive the loader. Throws hfta::Error on bad options or when an epoch would
  // have no batch (drop_last with fewer samples than batch_size).
  Loader(const Dataset& data, const LoaderOptions& options);
  Loader(Dataset&&, const LoaderOptions&) = delete;  // would dangle

  // A batch with buffers for batch_size rows.
  Batch make_batch() const;

  // Fills the next batch of the current epoch and returns true; at the end of the epoch returns
  // false and moves to the next epoch, so `while (loader.next(b))` runs exactly one epoch.
  bool next(Batch& batch);
  // Same, into views: images [N, ...sample_shape] and labels [N] (N = batch_size; [N, S] for a
  // dataset of S labels per sample). Returns the rows written (the first rows of both views), 0
  // at the end of the epoch.
  int64_t next(const TensorView& images, const IndexView& labels);

  // Restarts at the beginning of epoch `epoch` (e.g. to resume a run).
  void start_epoch(int64_t epoch);

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // Samples visited per epoch (the sum of the batches' rows).
  int64_t samples_per_epoch() const;
  // The epoch the next call to next() reads from, and the batch index inside it.
  int64_t epoch() const { return epoch_; }
  int64_t batch_index() const { return batch_; }
  const Dataset& dataset() const { return data_; }
  const LoaderOptions& options() const { return options_; }
  // The sample order of the current epoch (size dataset().size).
  const std::vector<int64_t>& order() const { return order_; }

 private:
  const Dataset& data_;
  LoaderOptions options_;
  int64_t batches_per_epoch_ = 0;
  int64_t epoch_ = 0;
  int64_t batch_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace hfta
