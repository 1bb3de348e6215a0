#include "io/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/device_memory.h"
#include "core/error.h"
#include "io/crc32.h"
#include "io/temp_file.h"
#include "models/model.h"
#include "optim/optimizer.h"

namespace hfta {

namespace {

constexpr char kMagic[8] = {'H', 'F', 'T', 'A', 'C', 'K', 'P', 'T'};
// Version 3's CRC covers every byte before it; version 2's covered the data only, so a damaged
// header (a hyperparameter, the step, a model id) loaded as if it were whole. Both are read.
constexpr uint32_t kVersion = 3;
constexpr uint32_t kVersionDataCrc = 2;

// The CRC of a file's parts before the data: magic, version, header length and header.
uint32_t crc_of_head(uint32_t version, uint64_t header_bytes, const std::string& text) {
  uint32_t crc = crc32_update(crc32_start(), kMagic, sizeof kMagic);
  crc = crc32_update(crc, &version, sizeof version);
  crc = crc32_update(crc, &header_bytes, sizeof header_bytes);
  return crc32_update(crc, text.data(), text.size());
}

// A file written with plain POSIX calls, so that it can be fsync'ed before the rename.
class RawFile {
 public:
  explicit RawFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    HFTA_CHECK(fd_ >= 0, "cannot write checkpoint {}: {}", path, std::strerror(errno));
  }
  ~RawFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;
  void write(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, bytes);
      if (n < 0 && errno == EINTR) continue;
      HFTA_CHECK(n > 0, "cannot write checkpoint {}: {}{}", path_, std::strerror(errno),
                 errno == ENOSPC ? " (free some space or choose another --out)" : "");
      p += n;
      bytes -= static_cast<size_t>(n);
    }
  }
  // Flushes the data to the disk and closes the file.
  void sync_and_close() {
    HFTA_CHECK(::fsync(fd_) == 0, "cannot write checkpoint {}: fsync failed: {}", path_,
               std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    HFTA_CHECK(::close(fd) == 0, "cannot write checkpoint {}: {}", path_, std::strerror(errno));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// Makes a rename inside `dir` durable. Best effort: some file systems refuse fsync on a
// directory, and the checkpoint is already complete under its new name.
void sync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::vector<int64_t> dims(const Shape& s) { return {s.begin(), s.end()}; }

// The shape of a tensor read from `path`, whose elements must number at most `max_numel` (the
// floats in the file): checked dimension by dimension, so that a corrupt one cannot overflow.
Shape shape_of(const std::vector<int64_t>& d, const std::string& path, const std::string& name,
               uint64_t max_numel) {
  HFTA_CHECK(d.size() >= 1 && d.size() <= static_cast<size_t>(kMaxRank),
             "{}: tensor {} has rank {}, expected 1 to {}", path, name, d.size(), kMaxRank);
  Shape s;
  uint64_t numel = 1;
  for (int64_t v : d) {
    HFTA_CHECK(v >= 1, "{}: tensor {} has a dimension {}", path, name, v);
    HFTA_CHECK(static_cast<uint64_t>(v) <= max_numel / numel,
               "{}: tensor {} has shape [{}], more than the {} floats of data in the file: the "
               "header is corrupt",
               path, name, fmt::join(d, ", "), max_numel);
    numel *= static_cast<uint64_t>(v);
    s.push_back(v);
  }
  return s;
}

// nlohmann converts a JSON float to an integer with a cast, undefined when it overflows (a
// corrupt "B": 1e300); the writer writes integers, so the fields read as integers must be ones.
void check_integer_fields(const nlohmann::json& j, const std::string& path) {
  // The keys read as integers: at the top, in "dataset", "language_model" and each tensor.
  constexpr std::string_view kIntegerKeys =
      " num_classes B seed batch_size model_ids epoch step batch_in_epoch optimizer_steps "
      "skipped_steps data_floats shape offset forward_origins sample_shape vocab vocab_hash emsize "
      "nhid nlayers nhead bptt synthetic_test_size ";
  if (!j.is_object()) return;
  for (const auto& [key, value] : j.items()) {
    if (kIntegerKeys.find(" " + key + " ") == std::string_view::npos) continue;
    const bool integers =
        value.is_array() ? std::none_of(value.begin(), value.end(),
                                        [](const nlohmann::json& v) { return v.is_number_float(); })
                         : !value.is_number_float();
    HFTA_CHECK(integers, "{} has a malformed header: {} is {}, expected an integer", path, key,
               value.dump());
  }
}

nlohmann::json lm_json(const LmCheckpointInfo& l) {
  return {{"vocab", l.vocab},       {"vocab_hash", l.vocab_hash},
          {"emsize", l.emsize},     {"nhid", l.nhid},
          {"nlayers", l.nlayers},   {"nhead", l.nhead},
          {"bptt", l.bptt},         {"dropout", l.dropout},
          {"dataset", l.dataset},   {"text_files", l.text_files},
          {"data_dir", l.data_dir}, {"corpus", l.corpus}};
}

LmCheckpointInfo lm_from_json(const nlohmann::json& j) {
  return {.vocab = j.at("vocab").get<int64_t>(),
          .vocab_hash = j.at("vocab_hash").get<uint64_t>(),
          .emsize = j.at("emsize").get<int64_t>(),
          .nhid = j.at("nhid").get<int64_t>(),
          .nlayers = j.at("nlayers").get<int64_t>(),
          .nhead = j.at("nhead").get<int64_t>(),
          .bptt = j.at("bptt").get<int64_t>(),
          .dropout = j.at("dropout").get<double>(),
          .dataset = j.at("dataset").get<std::string>(),
          .text_files = j.at("text_files").get<std::string>(),
          .data_dir = j.at("data_dir").get<std::string>(),
          .corpus = j.at("corpus").get<std::string>()};
}

}  // namespace

void Checkpoint::check() const {
  HFTA_CHECK(B >= 1, "checkpoint of {} models", B);
  auto per_model = [&](size_t size, const char* what) {
    HFTA_CHECK(size == static_cast<size_t>(B), "checkpoint: {} has {} values for {} models", what,
               size, B);
  };
  per_model(model_ids.size(), "model_ids");
  per_model(epoch_loss_sum.size(), "epoch_loss_sum");
  per_model(last_train_loss.size(), "last_train_loss");
  per_model(optimizer_steps.size(), "optimizer_steps");
  per_model(skipped_steps.size(), "skipped_steps");
  for (const auto& [name, values] : hyper) per_model(values.size(), name.c_str());
  if (!forward_origins.empty()) per_model(forward_origins.size(), "forward_origins");
  for (const CheckpointTensor& t : tensors) {
    HFTA_CHECK(t.shape.rank() >= 1 && t.shape[0] == B,
               "checkpoint: tensor {} has shape {}, expected [{}, ...]", t.name, t.shape.str(), B);
    HFTA_CHECK(t.source != nullptr || static_cast<int64_t>(t.values.size()) == t.shape.numel(),
               "checkpoint: tensor {} has {} values for shape {}", t.name, t.values.size(),
               t.shape.str());
  }
}

// JSON has no NaN or infinity (nlohmann writes them as null, which does not read back as a
// number), yet a diverged model's training loss is NaN: such values are written as the strings
// "nan", "inf" and "-inf", and read back from them.
nlohmann::json losses_json(const std::vector<double>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (double v : values) {
    if (std::isnan(v))
      out.push_back("nan");
    else if (std::isinf(v))
      out.push_back(v > 0 ? "inf" : "-inf");
    else
      out.push_back(v);
  }
  return out;
}

std::vector<double> losses_from_json(const nlohmann::json& j, const std::string& path,
                                     const char* key) {
  HFTA_CHECK(j.is_array(), "{} has a malformed header: {} is {}, expected a list of numbers", path,
             key, j.dump());
  std::vector<double> out;
  for (const nlohmann::json& v : j) {
    if (v.is_number()) {
      out.push_back(v.get<double>());
    } else if (v == "nan") {
      out.push_back(std::numeric_limits<double>::quiet_NaN());
    } else if (v == "inf" || v == "-inf") {
      out.push_back(v == "inf" ? std::numeric_limits<double>::infinity()
                               : -std::numeric_limits<double>::infinity());
    } else {
      fail(
          "{} has a malformed header: {} holds {}, expected a number, \"nan\", \"inf\" or "
          "\"-inf\"",
          path, key, v.dump());
    }
  }
  return out;
}

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  c.check();
  nlohmann::json header = {
      {"model", c.model},
      {"sample_shape", c.sample_shape},
      {"num_classes", c.num_classes},
      {"dropout", c.dropout},
      {"no_decay_norm_bias", c.no_decay_norm_bias},
      {"B", c.B},
      {"seed", c.seed},
      {"batch_size", c.batch_size},
      {"model_ids", c.model_ids},
      {"optimizer", c.optimizer},
      {"hyper", c.hyper},
      {"epoch", c.epoch},
      {"batch_in_epoch", c.batch_in_epoch},
      {"step", c.step},
      {"epoch_loss_sum", losses_json(c.epoch_loss_sum)},
      {"last_train_loss", losses_json(c.last_train_loss)},
      {"optimizer_steps", c.optimizer_steps},
      {"skipped_steps", c.skipped_steps},
  };
  // The tensors are written one after another straight from the checkpoint (no copy of all
  // values in one buffer): the writer of periodic checkpoints holds one snapshot, not two.
  uint64_t floats = 0;
  nlohmann::json tensors = nlohmann::json::array();
  for (const CheckpointTensor& t : c.tensors) {
    tensors.push_back({{"name", t.name}, {"shape", dims(t.shape)}, {"offset", floats}});
    floats += static_cast<uint64_t>(t.shape.numel());
  }
  header["tensors"] = tensors;
  // Only when a slot was refilled: other files stay as they were.
  if (std::any_of(c.forward_origins.begin(), c.forward_origins.end(),
                  [](int64_t o) { return o != 0; }))
    header["forward_origins"] = c.forward_origins;
  if (c.lm) header["language_model"] = lm_json(*c.lm);
  if (!c.dataset.empty())
    header["dataset"] = {{"name", c.dataset},
                         {"data_dir", c.data_dir},
                         {"synthetic_test_size", c.synthetic_test_size}};
  if (!c.plan.empty()) header["plan"] = c.plan;
  header["data_floats"] = floats;
  const std::string text = header.dump();
  const uint64_t header_bytes = text.size();

  TempFile tmp(path + ".tmp");
  {
    RawFile out(tmp.path());
    out.write(kMagic, sizeof kMagic);
    out.write(&kVersion, sizeof kVersion);
    out.write(&header_bytes, sizeof header_bytes);
    out.write(text.data(), text.size());
    uint32_t crc = crc_of_head(kVersion, header_bytes, text);
    auto write = [&](const float* data, size_t floats) {
      out.write(data, floats * sizeof(float));
      crc = crc32_update(crc, data, floats * sizeof(float));
    };
    std::vector<float> staged;  // a borrowed device tensor, copied back a piece at a time
    for (const CheckpointTensor& t : c.tensors) {
      const auto numel = static_cast<size_t>(t.shape.numel());
      if (t.source == nullptr) {
        write(t.values.data(), numel);
      } else if (t.source_device == Device::kCpu) {
        write(t.source, numel);
      } else {
        constexpr size_t kStagedFloats = size_t{1} << 20;
        staged.resize(std::min(numel, kStagedFloats));
        for (size_t at = 0; at < numel; at += staged.size()) {
          const size_t n = std::min(staged.size(), numel - at);
          copy_memory(staged.data(), Device::kCpu, t.source + at, t.source_device,
                      n * sizeof(float));
          write(staged.data(), n);
        }
      }
    }
    out.write(&crc, sizeof crc);
    out.sync_and_close();
  }
  std::error_code ec;
  std::filesystem::rename(tmp.path(), path, ec);
  HFTA_CHECK(!ec, "cannot move checkpoint {} to {}: {}", tmp.path(), path, ec.message());
  tmp.renamed();
  sync_directory(std::filesystem::path(path).parent_path());
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  HFTA_CHECK(in.good(), "cannot read checkpoint {}: {}", path, std::strerror(errno));
  char magic[sizeof kMagic] = {};
  uint32_t version = 0;
  uint64_t header_bytes = 0;
  in.read(magic, sizeof magic);
  HFTA_CHECK(in.good() && std::memcmp(magic, kMagic, sizeof kMagic) == 0,
             "{} is not an hfta checkpoint (it does not start with HFTACKPT)", path);
  in.read(reinterpret_cast<char*>(&version), sizeof version);
  in.read(reinterpret_cast<char*>(&header_bytes), sizeof header_bytes);
  HFTA_CHECK(in.good(), "{} is truncated: it ends inside its header", path);
  HFTA_CHECK(version == kVersion || version == kVersionDataCrc,
             "{} is a version {} checkpoint; this hfta reads versions {} and {}", path, version,
             kVersionDataCrc, kVersion);
  const auto file_size = std::filesystem::file_size(path);
  HFTA_CHECK(header_bytes < file_size,
             "{} is truncated or corrupt: header of {} bytes in a file "
             "of {}",
             path, header_bytes, file_size);
  std::string text(header_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_bytes));
  HFTA_CHECK(in.good(), "{} is truncated: it ends inside its header", path);
  // The data and the CRC fill the rest of the file; the sum is checked before the header is
  // interpreted, so a damaged file is reported as damaged, not as a strange header.
  const uint64_t head_size = sizeof kMagic + sizeof version + sizeof header_bytes + header_bytes;
  const uint64_t rest = file_size - head_size;
  HFTA_CHECK(rest >= sizeof(uint32_t) && (rest - sizeof(uint32_t)) % sizeof(float) == 0,
             "{} is {} bytes, which its header of {} bytes leaves no whole floats and checksum "
             "after: the file is truncated or corrupt",
             path, file_size, header_bytes);
  std::vector<float> data((rest - sizeof(uint32_t)) / sizeof(float));
  in.read(reinterpret_cast<char*>(data.data()),
          static_cast<std::streamsize>(data.size() * sizeof(float)));
  uint32_t crc = 0;
  in.read(reinterpret_cast<char*>(&crc), sizeof crc);
  HFTA_CHECK(in.good(), "{} is truncated: it ends inside its data", path);
  const uint32_t expected_crc =
      crc32_update(version == kVersion ? crc_of_head(version, header_bytes, text) : crc32_start(),
                   data.data(), data.size() * sizeof(float));
  HFTA_CHECK(crc == expected_crc, "{} is corrupt: the checksum of its {} does not match", path,
             version == kVersion ? "header and data" : "data");

  Checkpoint c;
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(text);
    check_integer_fields(h, path);
    for (const char* part : {"dataset", "language_model"})
      if (h.is_object() && h.contains(part)) check_integer_fields(h.at(part), path);
    c.model = h.at("model").get<std::string>();
    c.sample_shape = h.at("sample_shape").get<std::vector<int64_t>>();
    c.num_classes = h.at("num_classes").get<int64_t>();
    c.dropout = h.at("dropout").get<double>();
    c.no_decay_norm_bias = h.at("no_decay_norm_bias").get<bool>();
    c.B = h.at("B").get<int64_t>();
    c.seed = h.at("seed").get<uint64_t>();
    c.batch_size = h.at("batch_size").get<int64_t>();
    c.model_ids = h.at("model_ids").get<std::vector<int64_t>>();
    c.optimizer = h.at("optimizer").get<std::string>();
    c.hyper = h.at("hyper").get<std::map<std::string, std::vector<double>>>();
    c.epoch = h.at("epoch").get<int64_t>();
    c.batch_in_epoch = h.at("batch_in_epoch").get<int64_t>();
    c.step = h.at("step").get<int64_t>();
    c.epoch_loss_sum = losses_from_json(h.at("epoch_loss_sum"), path, "epoch_loss_sum");
    c.last_train_loss = losses_from_json(h.at("last_train_loss"), path, "last_train_loss");
    c.optimizer_steps = h.at("optimizer_steps").get<std::vector<int64_t>>();
    c.skipped_steps = h.at("skipped_steps").get<std::vector<int64_t>>();
    const auto floats = h.at("data_floats").get<uint64_t>();
    HFTA_CHECK(floats == data.size(),
               "{} holds {} floats of data but its header claims {}: the file is corrupt", path,
               data.size(), floats);
    if (h.contains("forward_origins"))
      c.forward_origins = h.at("forward_origins").get<std::vector<int64_t>>();
    if (h.contains("language_model")) c.lm = lm_from_json(h.at("language_model"));
    if (h.contains("plan")) c.plan = h.at("plan").get<std::string>();
    if (h.contains("dataset")) {
      c.dataset = h.at("dataset").at("name").get<std::string>();
      c.data_dir = h.at("dataset").at("data_dir").get<std::string>();
      c.synthetic_test_size = h.at("dataset").value("synthetic_test_size", int64_t{0});
    }
    // The writer puts the tensors one after another: a header whose offsets or shapes leave a
    // gap, an overlap or data over is corrupt (a version 2 file's checksum covers only its data).
    uint64_t next = 0;
    for (const auto& t : h.at("tensors")) {
      check_integer_fields(t, path);
      CheckpointTensor tensor;
      tensor.name = t.at("name").get<std::string>();
      tensor.shape =
          shape_of(t.at("shape").get<std::vector<int64_t>>(), path, tensor.name, data.size());
      const auto offset = t.at("offset").get<uint64_t>();
      const auto n = static_cast<uint64_t>(tensor.shape.numel());
      HFTA_CHECK(offset == next && n <= data.size() - offset,
                 "{}: tensor {} of {} floats is at offset {}, expected {} in data of {} floats: "
                 "the header is corrupt",
                 path, tensor.name, n, offset, next, data.size());
      tensor.values.assign(data.begin() + static_cast<int64_t>(offset),
                           data.begin() + static_cast<int64_t>(offset + n));
      c.tensors.push_back(std::move(tensor));
      next = offset + n;
    }
    HFTA_CHECK(next == data.size(),
               "{}: its tensors hold {} floats, its data {}: the header is corrupt", path, next,
               data.size());
  } catch (const nlohmann::json::exception& e) {
    fail("{} has a malformed header: {}", path, e.what());
  }
  try {
    c.check();
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  return c;
}

namespace {

// Calls use(values, numel) for every tensor of `c` in order with its floats in host memory: its
// values, or the live tensor it borrows (from a device, copied back into one staging buffer).
template <typename Use>
void for_each_host_tensor(const Checkpoint& c, Use&& use) {
  std::vector<float> staged;
  for (const CheckpointTensor& t : c.tensors) {
    if (t.source == nullptr) {
      use(t.values.data(), t.values.size());
      continue;
    }
    const auto numel = static_cast<size_t>(t.shape.numel());
    const float* values = t.source;
    if (t.source_device != Device::kCpu) {
      staged.resize(numel);
      copy_memory(staged.data(), Device::kCpu, t.source, t.source_device, numel * sizeof(float));
      values = staged.data();
    }
    use(values, numel);
  }
}

}  // namespace

uint32_t model_state_crc32(const Checkpoint& c, int64_t b) {
  HFTA_CHECK(b >= 0 && b < c.B, "no model {} in a checkpoint of {} models (0 to {})", b, c.B,
             c.B - 1);
  uint32_t crc = crc32_start();
  for_each_host_tensor(c, [&](const float* values, size_t numel) {
    const size_t per_model = numel / static_cast<size_t>(c.B);
    crc = crc32_update(crc, values + static_cast<size_t>(b) * per_model, per_model * sizeof(float));
  });
  return crc;
}

std::vector<uint32_t> model_state_crc32s(const Checkpoint& c) {
  const auto B = static_cast<size_t>(c.B);
  std::vector<uint32_t> crcs(B, crc32_start());
  for_each_host_tensor(c, [&](const float* values, size_t numel) {
    const size_t per_model = numel / B;  // a [B, ...] tensor: model b's slice is contiguous
    for (size_t b = 0; b < B; ++b)
      crcs[b] = crc32_update(crcs[b], values + b * per_model, per_model * sizeof(float));
  });
  return crcs;
}

Checkpoint extract_model(const Checkpoint& c, int64_t b) {
  HFTA_CHECK(b >= 0 && b < c.B, "no model {} in a checkpoint of {} models (0 to {})", b, c.B,
             c.B - 1);
  // The meta data whole, the tensors sliced: copying all B models' values to keep one made
  // saving every model of an array (hfta tune) quadratic in B.
  Checkpoint one;
  static_cast<CheckpointMeta&>(one) = c;
  one.B = 1;
  one.model_ids = {c.model_ids[b]};
  for (auto& [name, values] : one.hyper) values = {values[b]};
  one.epoch_loss_sum = {c.epoch_loss_sum[b]};
  one.last_train_loss = {c.last_train_loss[b]};
  one.optimizer_steps = {c.optimizer_steps[b]};
  one.skipped_steps = {c.skipped_steps[b]};
  if (!c.forward_origins.empty()) one.forward_origins = {c.forward_origins[b]};
  one.tensors.reserve(c.tensors.size());
  for (const CheckpointTensor& all : c.tensors) {
    CheckpointTensor& t = one.tensors.emplace_back();
    t.name = all.name;
    t.shape = all.shape;
    const int64_t n = t.shape.numel_from(1);
    t.values.assign(all.values.begin() + b * n, all.values.begin() + (b + 1) * n);
    t.shape[0] = 1;
  }
  return one;
}

ModelSpec model_spec(const Checkpoint& c, int64_t batch_size) {
  Shape sample;
  for (int64_t d : c.sample_shape) sample.push_back(d);
  ModelSpec spec{.B = c.B,
                 .batch_size = batch_size,
                 .seed = c.seed,
                 .model_ids = c.model_ids,
                 .sample_shape = sample,
                 .num_classes = c.num_classes};
  if (c.dropout >= 0) spec.dropout = static_cast<float>(c.dropout);
  return spec;
}

}  // namespace hfta
