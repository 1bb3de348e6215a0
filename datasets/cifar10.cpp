#include "datasets/cifar10.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "core/parallel.h"

namespace hfta {
namespace {

constexpr int kClasses = 10;
constexpr int64_t kChannels = 3, kSide = 32, kPlane = kSide * kSide;
constexpr int64_t kPixels = kChannels * kPlane;
constexpr const char* kWhereFrom =
    "expected the \"CIFAR-10 binary version\" (cifar-10-binary.tar.gz from "
    "https://www.cs.toronto.edu/~kriz/cifar.html), unpacked: pass its cifar-10-batches-bin "
    "directory";

std::vector<std::string> split_files(Split split) {
  if (split == Split::kTest) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back(fmt::format("data_batch_{}.bin", i));
  return names;
}

// The number of records in the file, whose size must be a positive multiple of the record size.
int64_t count_records(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  HFTA_CHECK(!ec, "cannot read CIFAR-10 file '{}': {}", path, ec.message());
  HFTA_CHECK(size > 0, "CIFAR-10 file '{}' is empty: {}", path, kWhereFrom);
  HFTA_CHECK(size % kCifar10RecordBytes == 0,
             "CIFAR-10 file '{}' has {} bytes, not a multiple of the {}-byte record (1 label byte "
             "+ 3072 pixel bytes): {} whole records and {} bytes more; the file is truncated or "
             "not the binary version",
             path, size, kCifar10RecordBytes, size / kCifar10RecordBytes,
             size % kCifar10RecordBytes);
  return static_cast<int64_t>(size / kCifar10RecordBytes);
}

std::vector<uint8_t> read_bytes(const std::string& path, int64_t size) {
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  HFTA_CHECK(in.good() && in.gcount() == size,
             "cannot read CIFAR-10 file '{}': read {} of its {} bytes", path, in.gcount(), size);
  return bytes;
}

}  // namespace

Dataset load_cifar10(const std::string& dir, Split split) {
  namespace fs = std::filesystem;
  const std::string split_name = split == Split::kTrain ? "training" : "test";
  std::error_code ec;
  HFTA_CHECK(fs::is_directory(dir, ec),
             "CIFAR-10 directory '{}' does not exist: the {} split needs {} there; {}", dir,
             split_name, fmt::join(split_files(split), ", "), kWhereFrom);
  std::vector<std::string> paths, missing;
  for (const auto& name : split_files(split)) {
    paths.push_back((fs::path(dir) / name).string());
    if (!fs::exists(paths.back(), ec)) missing.push_back(name);
  }
  HFTA_CHECK(missing.empty(), "CIFAR-10 {} file{} missing in '{}': {}; {}", split_name,
             missing.size() == 1 ? " is" : "s are", dir, fmt::join(missing, ", "), kWhereFrom);

  Dataset out;
  out.name = split == Split::kTrain ? "cifar10-train" : "cifar10-test";
  out.sample_shape = Shape{kChannels, kSide, kSide};
  out.num_classes = kClasses;
  // (p / 255 - mean[c]) / std[c], folded into one multiply-add per pixel.
  float scale[kChannels], shift[kChannels];
  for (int c = 0; c < kChannels; ++c) {
    scale[c] = 1.0f / (255.0f * kCifar10Std[c]);
    shift[c] = -kCifar10Mean[c] / kCifar10Std[c];
  }
  // Every file's size is checked before anything is read or allocated. A file's size is its
  // claim: records that would not fit in memory as floats are refused rather than allocated.
  const uint64_t memory =
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  std::vector<int64_t> records;
  for (const auto& path : paths) {
    records.push_back(count_records(path));
    out.size += records.back();
    const uint64_t needed = static_cast<uint64_t>(out.size) * (kPixels * sizeof(float) + 1);
    HFTA_CHECK(needed <= memory,
               "CIFAR-10 file '{}' has {} records ({} bytes): the split's records so far need {} "
               "bytes of memory as floats, more than this machine's {}; a CIFAR-10 batch has "
               "10000 records, so the file is not one",
               path, records.back(), records.back() * kCifar10RecordBytes, needed, memory);
  }
  out.images.resize(static_cast<size_t>(out.size * kPixels));
  out.labels.resize(static_cast<size_t>(out.size));
  int64_t first = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    const std::string& path = paths[f];
    const std::vector<uint8_t> bytes = read_bytes(path, records[f] * kCifar10RecordBytes);
    for (int64_t r = 0; r < records[f]; ++r) {
      const uint8_t label = bytes[r * kCifar10RecordBytes];
      HFTA_CHECK(label < kClasses,
                 "CIFAR-10 file '{}' has label {} in record {} (byte offset {}), expected 0 to 9: "
                 "is it the binary version of CIFAR-10 (not CIFAR-100)?",
                 path, label, r, r * kCifar10RecordBytes);
      out.labels[first + r] = label;
    }
    parallel_for(records[f], [&](int64_t r) {
      const uint8_t* src = bytes.data() + r * kCifar10RecordBytes + 1;
      float* dst = out.images.data() + (first + r) * kPixels;
      for (int64_t c = 0; c < kChannels; ++c)
        for (int64_t j = 0; j < kPlane; ++j)
          dst[c * kPlane + j] = src[c * kPlane + j] * scale[c] + shift[c];
    });
    first += records[f];
  }
  return out;
}

}  // namespace hfta
