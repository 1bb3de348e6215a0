// CIFAR-10 binary files: small files (3 records each) written here read back exactly (labels,
// channel-major pixels, per-channel normalization); missing, truncated, empty files and labels
// above 9 raise errors naming the files; synthetic data comes in CIFAR's [3, 32, 32] shape.
#include <fstream>
#include <functional>

#include "datasets/cifar10.h"
#include "datasets/loader.h"
#include "datasets/synthetic.h"
#include "test_files.h"
#include "test_util.h"

namespace hfta {
using test::expect_error_containing_all;
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr int64_t kRecords = 3;  // per file

// The pixel byte of channel c, pixel j (= y * 32 + x) of record r in file f: every value differs
// between neighbouring pixels, channels, records and files, and all 256 values occur.
uint8_t pixel(int f, int64_t r, int64_t c, int64_t j) {
  return static_cast<uint8_t>((f * 101 + r * 37 + c * 59 + j * 7) % 256);
}
uint8_t label(int f, int64_t r) { return static_cast<uint8_t>((f * kRecords + r) % 10); }

Bytes cifar_file(int f, int64_t records) {
  Bytes out;
  for (int64_t r = 0; r < records; ++r) {
    out.push_back(label(f, r));
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t j = 0; j < 1024; ++j) out.push_back(pixel(f, r, c, j));
  }
  return out;
}

void write_bytes(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Files 1..5 are data_batch_f.bin, file 0 is test_batch.bin.
std::string file_name(int f) {
  return f == 0 ? "test_batch.bin" : fmt::format("data_batch_{}.bin", f);
}

void write_all(const fs::path& dir) {
  for (int f = 0; f <= 5; ++f) write_bytes(dir / file_name(f), cifar_file(f, kRecords));
}

void expect_file(const Dataset& d, int f, int64_t first) {
  for (int64_t r = 0; r < kRecords; ++r) {
    EXPECT_EQ(d.labels[first + r], label(f, r)) << file_name(f) << " record " << r;
    const float* x = d.sample(first + r);
    int64_t misses = 0;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t j = 0; j < 1024; ++j) {
        const double expected = (pixel(f, r, c, j) / 255.0 - kCifar10Mean[c]) / kCifar10Std[c];
        misses += std::fabs(x[c * 1024 + j] - expected) > 2e-6;
      }
    EXPECT_EQ(misses, 0) << file_name(f) << " record " << r;
  }
}

TEST(DatasetCifar10, ReadsBothSplitsExactly) {
  test::TempDir dir("cifar10_reads");
  write_all(dir.path);
  const Dataset train = load_cifar10(dir.path.string(), Split::kTrain);
  EXPECT_EQ(train.name, "cifar10-train");
  EXPECT_EQ(train.sample_shape, (Shape{3, 32, 32}));
  EXPECT_EQ(train.num_classes, 10);
  ASSERT_EQ(train.size, 5 * kRecords);
  EXPECT_NO_THROW(train.check());
  for (int f = 1; f <= 5; ++f) expect_file(train, f, (f - 1) * kRecords);
  // Spot values by hand: file 1 record 0, green channel (c = 1), pixel (y, x) = (0, 2):
  // byte (101 + 59 + 14) % 256 = 174, x = (174 / 255 - 0.4822) / 0.2435.
  EXPECT_NEAR(train.sample(0)[1024 + 2], (174.0 / 255 - 0.4822) / 0.2435, 2e-6);
  // Byte 0 and 255 map to -mean / std and (1 - mean) / std: file 1, record 0, red channel.
  const float* s = train.sample(0);
  for (int64_t j = 0; j < 1024; ++j) {
    if (pixel(1, 0, 0, j) == 0) {
      EXPECT_NEAR(s[j], -0.4914 / 0.2470, 2e-6);
    }
    if (pixel(1, 0, 0, j) == 255) {
      EXPECT_NEAR(s[j], (1 - 0.4914) / 0.2470, 2e-6);
    }
  }
  const Dataset test = load_cifar10(dir.path.string(), Split::kTest);
  EXPECT_EQ(test.name, "cifar10-test");
  ASSERT_EQ(test.size, kRecords);
  expect_file(test, 0, 0);
  // A loader serves [N, 3, 32, 32] batches of it.
  Loader loader(train, {.batch_size = 4, .seed = 1});
  Batch batch = loader.make_batch();
  ASSERT_TRUE(loader.next(batch));
  EXPECT_EQ(batch.images().shape, (Shape{4, 3, 32, 32}));
}

TEST(DatasetCifar10, MissingFilesAreAllNamed) {
  test::TempDir dir("cifar10_missing");
  write_all(dir.path);
  fs::remove(dir.path / "data_batch_2.bin");
  fs::remove(dir.path / "data_batch_5.bin");
  const std::vector<std::string> where = {"CIFAR-10 binary version", "cs.toronto.edu",
                                          "cifar-10-batches-bin"};
  std::vector<std::string> parts = where;
  parts.insert(parts.end(), {"training files are missing", dir.path.string(),
                             "data_batch_2.bin, data_batch_5.bin"});
  expect_error_containing_all([&] { load_cifar10(dir.path.string(), Split::kTrain); }, parts,
                              {"data_batch_1.bin", "data_batch_3.bin", "data_batch_4.bin"});
  EXPECT_EQ(load_cifar10(dir.path.string(), Split::kTest).size, kRecords);
  fs::remove(dir.path / "test_batch.bin");
  parts = where;
  parts.insert(parts.end(), {"test file is missing", "test_batch.bin"});
  expect_error_containing_all([&] { load_cifar10(dir.path.string(), Split::kTest); }, parts);
  parts = where;
  parts.insert(parts.end(), {"does not exist", "nowhere", "data_batch_1.bin", "data_batch_5.bin"});
  expect_error_containing_all([&] { load_cifar10((dir.path / "nowhere").string(), Split::kTrain); },
                              parts);
}

TEST(DatasetCifar10, TruncatedOrEmptyFile) {
  test::TempDir dir("cifar10_truncated");
  write_all(dir.path);
  Bytes bytes = cifar_file(3, kRecords);
  bytes.resize(2 * 3073 + 100);
  write_bytes(dir.path / "data_batch_3.bin", bytes);
  expect_error_containing_all(
      [&] { load_cifar10(dir.path.string(), Split::kTrain); },
      {(dir.path / "data_batch_3.bin").string(), "6246 bytes", "3073-byte record",
       "2 whole records and 100 bytes more", "truncated"});
  write_bytes(dir.path / "data_batch_3.bin", {});
  expect_error_containing_all([&] { load_cifar10(dir.path.string(), Split::kTrain); },
                              {(dir.path / "data_batch_3.bin").string(), "empty"});
}

TEST(DatasetCifar10, LabelAboveNine) {
  test::TempDir dir("cifar10_label");
  write_all(dir.path);
  Bytes bytes = cifar_file(4, kRecords);
  bytes[1 * 3073] = 10;
  write_bytes(dir.path / "data_batch_4.bin", bytes);
  expect_error_containing_all(
      [&] { load_cifar10(dir.path.string(), Split::kTrain); },
      {(dir.path / "data_batch_4.bin").string(), "label 10", "record 1", "0 to 9"});
  bytes[1 * 3073] = 255;
  write_bytes(dir.path / "data_batch_4.bin", bytes);
  expect_error_containing_all([&] { load_cifar10(dir.path.string(), Split::kTrain); },
                              {"label 255"});
}

// make_synthetic gives CIFAR-shaped stand-in data: [3, 32, 32] samples with unit variance.
TEST(DatasetCifar10, SyntheticStandInHasCifarShape) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const Dataset d = make_synthetic(Shape{3, 32, 32}, 10, 64, seed);
  EXPECT_EQ(d.sample_shape, (Shape{3, 32, 32}));
  EXPECT_EQ(d.sample_numel(), 3072);
  EXPECT_EQ(d.images.size(), 64u * 3072u);
  EXPECT_NO_THROW(d.check());
  double sum = 0.0, sum_sq = 0.0;
  for (float x : d.images) sum += x, sum_sq += double(x) * x;
  const double n = static_cast<double>(d.images.size()), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(sum_sq / n - mean * mean, 1.0, 0.1);
  Loader loader(d, {.batch_size = 16, .seed = seed});
  Batch batch = loader.make_batch();
  ASSERT_TRUE(loader.next(batch));
  EXPECT_EQ(batch.images().shape, (Shape{16, 3, 32, 32}));
}

}  // namespace
}  // namespace hfta
