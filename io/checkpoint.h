// Checkpoints of a model array with its optimizer: to resume an interrupted `hfta train`, to pull
// one model out of an array (`hfta extract`), and to evaluate a saved model (`hfta eval`).
//
// File format (version 3), little-endian:
//   "HFTACKPT"  uint32 version  uint64 header_bytes  header (JSON)  float32 data  uint32 crc32
// where the CRC-32 covers every byte before it. Version 2 files (the same layout, their CRC over
// the data only) still load.
// The JSON header holds the architecture (name, sample shape, classes, dropout), B, seed, model
// ids, optimizer and per-model hyperparameters, training progress, and the list of tensors (name,
// shape [B, ...], offset into the data). Tensors are the parameters in recording order, named
// "<index>.<state_dict name>", then the persistent buffers (BatchNorm running statistics) by
// their state_dict names, then for each optimizer state buffer i the parameters again, named
// "<param>#state<i>". Every tensor is replica-major, so replica b of a
// checkpoint is the b-th slice of each tensor: extract_model() builds a B = 1 checkpoint from it,
// which trains on exactly as replica b would have.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/model.h"

namespace hfta {

class Net;
class Optimizer;

// What a language model checkpoint adds (models/language_model.h): the sizes, and the corpus
// whose vocabulary numbers the embedding and decoder rows. Per-model schedule values (clip,
// lr_gamma, lr_step_size) live in Checkpoint::hyper, so extract_model slices them too.
struct LmCheckpointInfo {
  int64_t vocab = 0;
  uint64_t vocab_hash = 0;  // vocabulary_hash() of the dictionary (datasets/text_corpus.h)
  int64_t emsize = 0, nhid = 0, nlayers = 0, nhead = 0, bptt = 0;
  double dropout = 0.0;
  std::string dataset, text_files, data_dir;  // where the corpus came from (for `hfta eval`)
  std::string corpus;                         // its name, for messages
};

struct CheckpointTensor {
  std::string name;
  Shape shape;  // [B, ...]
  std::vector<float> values;
  // Borrowed instead of copied (Checkpoint::borrow_tensors): the live tensor's first float, in
  // `source_device` memory, which save_checkpoint reads in place of `values`. Only for a save on
  // the training thread while the array stands still; every other reader wants `values`.
  const float* source = nullptr;
  Device source_device = Device::kCpu;
};

// Everything a checkpoint holds but its tensors (extract_model copies this part whole).
struct CheckpointMeta {
  // What was trained.
  std::string model;                  // architecture, as make_model() knows it
  std::vector<int64_t> sample_shape;  // one sample, as the data gave it (e.g. [3, 32, 32])
  int64_t num_classes = 0;
  double dropout = -1.0;  // --dropout, or negative for the architecture's own
  bool no_decay_norm_bias = false;
  int64_t B = 0;
  uint64_t seed = 0;
  int64_t batch_size = 0;
  // The data it was trained on (`hfta eval` scores its test split unless told otherwise): the
  // --dataset and --data-dir of the run. Empty in files written before they were recorded.
  std::string dataset, data_dir;
  // Test samples of generated data (synthetic, shapes); 0: unknown.
  int64_t synthetic_test_size = 0;
  // The execution plan the array ran (models/plan.h): a resumed run with --plan auto takes it
  // instead of timing the plans again, whose choice may differ and would change the rounding.
  // Empty in files written before it was recorded.
  std::string plan;
  std::vector<int64_t> model_ids;  // global index of each replica in its run
  std::string optimizer;           // adam, adamw, sgd
  // Per-model hyperparameters by name (lr, beta1, ...): B values each.
  std::map<std::string, std::vector<double>> hyper;
  // How far: `epoch` epochs finished plus `batch_in_epoch` batches of the next; `step` optimizer
  // steps in all. Sums of the partial epoch's losses, steps each model took and skipped.
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;
  int64_t step = 0;
  std::vector<double> epoch_loss_sum;
  std::vector<double> last_train_loss;  // mean train loss of the last finished epoch (0 if none)
  std::vector<int64_t> optimizer_steps, skipped_steps;
  // Net::forward_origins(): the training forward at which each model's dropout count starts (not
  // 0 for a slot refilled in a live array). Empty, as in files written before it existed, means
  // all zeros.
  std::vector<int64_t> forward_origins;
  std::optional<LmCheckpointInfo> lm;  // language models only (header key "language_model")
};

struct Checkpoint : CheckpointMeta {
  std::vector<CheckpointTensor> tensors;
  // Set around a fill whose checkpoint is saved at once on the training thread (an epoch's end,
  // Ctrl-C): the captures borrow the live tensors (CheckpointTensor::source) instead of copying
  // them, so the save holds no second copy of every model's state. Not saved.
  bool borrow_tensors = false;

  // Throws hfta::Error when the fields disagree with each other (sizes of per-model lists, tensor
  // shapes not [B, ...]).
  void check() const;
};

// Writes atomically: a temporary file (`path`.tmp), fsync'ed, then renamed over `path`, so a
// crash (even SIGKILL or a power cut while writing) leaves the previous checkpoint or the new
// one, never half a file. Throws hfta::Error naming the file when it cannot be written.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
// Throws hfta::Error naming the file: missing, not a checkpoint, another version, truncated, or
// a checksum mismatch.
Checkpoint load_checkpoint(const std::string& path);

// Replica b alone, as a B = 1 checkpoint.
Checkpoint extract_model(const Checkpoint& checkpoint, int64_t b);
// CRC-32 of model b's slice of every tensor in order (parameters, buffers, optimizer state): the
// same for two runs exactly when they left model b with the same bits (summary.csv's
// state_crc32; --deterministic promises it between an array and the model trained alone). A
// borrowing checkpoint's tensors are read where they live (a device tensor copied back one at a
// time), so a run's summary needs no snapshot of every model's state.
uint32_t model_state_crc32(const Checkpoint& checkpoint, int64_t b);
// model_state_crc32 of every model, in one pass over the tensors.
std::vector<uint32_t> model_state_crc32s(const Checkpoint& checkpoint);
// The spec that rebuilds the checkpoint's models (architecture, sample shape, classes, dropout)
// for `batch_size` rows.
ModelSpec model_spec(const Checkpoint& checkpoint, int64_t batch_size);

// The tensors of a live array: parameters, then the optimizer's state buffers (if `optimizer`).
std::vector<CheckpointTensor> capture_tensors(const Model& model, const Optimizer* optimizer);
// The same into `tensors`, reusing its vectors when it already holds this array's tensors (a
// periodic snapshot then costs one copy of the values and no allocation). With `values` false it
// only names and sizes them (zeros): the memory is allocated and touched, values not read. With
// `borrow` it names them and points their `source` at the live tensors, copying nothing and
// leaving `values` as they were (Checkpoint::borrow_tensors).
void capture_tensors(const Model& model, const Optimizer* optimizer,
                     std::vector<CheckpointTensor>& tensors, bool values = true,
                     bool borrow = false);
// One tensor of such a fill: `t` becomes `name` of `shape`, whose first float is `first` in
// `device` memory; borrowed (t.source) with `borrow`, else copied into t.values (or only sized,
// without `values`), reusing t's allocation when the size is the same. For tasks that list their
// own tensors (the GAN's two nets and optimizers).
void fill_tensor(CheckpointTensor& t, const std::string& name, const Shape& shape,
                 const float* first, Device device, bool values, bool borrow);
// Copies the tensors back (optimizer state and step counts only when `optimizer`), and the
// dropout counts (training forwards = step, forward_origins). Throws
// hfta::Error naming the first tensor whose name or shape differs from the live array's.
void restore_tensors(const Checkpoint& checkpoint, Model& model, Optimizer* optimizer);
// The same for a bare Net (language models): parameters, buffers, then optimizer state; the
// caller checks the architecture. Also restores the net's count of training forwards (dropout).
void capture_tensors(const Net& net, const Optimizer* optimizer,
                     std::vector<CheckpointTensor>& tensors, bool values = true,
                     bool borrow = false);
void restore_tensors(const Checkpoint& checkpoint, Net& net, Optimizer* optimizer);

}  // namespace hfta
