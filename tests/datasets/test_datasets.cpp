// Datasets: the IDX reader accepts good files (gzip and plain) and rejects each kind of bad one
// with a message naming the file; Fashion-MNIST loads and normalizes; the loader visits every
// sample once per epoch in a deterministic (seed, epoch) order; synthetic data is deterministic
// and learnable.
#include <omp.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>

#include "datasets/fashion_mnist.h"
#include "datasets/idx.h"
#include "datasets/loader.h"
#include "datasets/synthetic.h"
#include "test_util.h"

namespace hfta {
using test::expect_error_containing_all;
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// A fresh directory per test, removed afterwards.
class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           fmt::format("hfta_datasets_{}_{}_{}", getpid(), info->test_suite_name(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

Bytes idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes out = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<uint8_t>(d >> shift));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_file(const std::string& path, const Bytes& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    if (!bytes.empty()) {
      ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
                static_cast<int>(bytes.size()));
    }
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
  }
}

Bytes read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Bytes random_bytes(size_t n, RngStream& rng) {
  Bytes out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng.next_u64());
  return out;
}

// ---------------------------------------------------------------------------------------------
// IDX reader

using DatasetIdx = TempDir;

TEST_F(DatasetIdx, RoundTripGzipAndPlain) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 0);
  const Bytes payload = random_bytes(3 * 2 * 5, rng);
  for (bool gzip : {true, false}) {
    // The name says nothing: gzip is detected by its magic bytes.
    const std::string p = path(gzip ? "compressed" : "plain.gz");
    write_file(p, idx_bytes(0x08, {3, 2, 5}, payload), gzip);
    EXPECT_EQ(read_raw(p)[0] == 0x1f, gzip) << "fixture is not what the test meant";
    IdxData d = read_idx(p);
    EXPECT_EQ(d.dims, (std::vector<int64_t>{3, 2, 5})) << "gzip=" << gzip;
    EXPECT_EQ(d.bytes, payload) << "gzip=" << gzip;
  }
}

TEST_F(DatasetIdx, LargeDimensionsAreBigEndian) {
  // 300 = 0x012C: a little-endian reader would see 0x2C010000 and fail the size check.
  Bytes payload(300 * 2, 7);
  write_file(path("a.gz"), idx_bytes(0x08, {300, 2}, payload), true);
  IdxData d = read_idx(path("a.gz"));
  EXPECT_EQ(d.dims, (std::vector<int64_t>{300, 2}));
  EXPECT_EQ(d.bytes.size(), 600u);
}

TEST_F(DatasetIdx, MissingFileNamesThePath) {
  const std::string p = path("no-such-file-idx1-ubyte.gz");
  expect_error_containing_all([&] { read_idx(p); }, {p, "does not exist"});
}

TEST_F(DatasetIdx, WrongMagic) {
  for (bool gzip : {true, false}) {
    Bytes bytes = idx_bytes(0x08, {4}, Bytes(4, 1));
    bytes[0] = 0x50, bytes[1] = 0x4b;  // a zip file, say
    write_file(path("bad"), bytes, gzip);
    expect_error_containing_all([&] { read_idx(path("bad")); }, {path("bad"), "magic", "50 4b"});
  }
}

TEST_F(DatasetIdx, UnsupportedType) {
  write_file(path("floats.gz"), idx_bytes(0x0D, {2}, Bytes(8, 0)), true);
  expect_error_containing_all([&] { read_idx(path("floats.gz")); },
                              {path("floats.gz"), "0x0d", "float32", "unsigned byte"});
}

TEST_F(DatasetIdx, BadRankAndZeroDimension) {
  write_file(path("rank0"), idx_bytes(0x08, {}, {}), false);
  expect_error_containing_all([&] { read_idx(path("rank0")); }, {path("rank0"), "0 dimensions"});
  write_file(path("rank9"), idx_bytes(0x08, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {1}), false);
  expect_error_containing_all([&] { read_idx(path("rank9")); }, {path("rank9"), "9 dimensions"});
  write_file(path("zero"), idx_bytes(0x08, {3, 0}, {}), true);
  expect_error_containing_all([&] { read_idx(path("zero")); }, {path("zero"), "size 0"});
}

TEST_F(DatasetIdx, ShortHeader) {
  write_file(path("empty"), {}, false);
  expect_error_containing_all([&] { read_idx(path("empty")); }, {path("empty"), "too short"});
  Bytes bytes = idx_bytes(0x08, {4, 5}, {});
  bytes.resize(6);  // cut inside the dimensions
  write_file(path("cut.gz"), bytes, true);
  expect_error_containing_all([&] { read_idx(path("cut.gz")); },
                              {path("cut.gz"), "header", "8 bytes, got 2"});
}

TEST_F(DatasetIdx, TruncatedPayloadReportsByteCounts) {
  for (bool gzip : {true, false}) {
    const std::string p = path(gzip ? "short.gz" : "short");
    write_file(p, idx_bytes(0x08, {4, 5}, Bytes(13, 9)), gzip);
    expect_error_containing_all([&] { read_idx(p); },
                                {p, "truncated", "20 payload bytes", "only 13"});
  }
}

TEST_F(DatasetIdx, TruncatedGzipStream) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  RngStream rng(seed, 1);
  const std::string full = path("full.gz"), cut = path("cut.gz");
  write_file(full, idx_bytes(0x08, {100, 100}, random_bytes(10000, rng)), true);
  Bytes compressed = read_raw(full);
  compressed.resize(compressed.size() / 2);  // a download that stopped half way
  write_file(cut, compressed, false);
  expect_error_containing_all([&] { read_idx(cut); }, {cut, "truncated", "10000 payload bytes"});
}

TEST_F(DatasetIdx, CorruptGzipData) {
  Bytes bytes = {0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03};  // a gzip header...
  for (int i = 0; i < 64; ++i) bytes.push_back(0xff);        // ...and an invalid deflate stream
  write_file(path("corrupt.gz"), bytes, false);
  expect_error_containing_all([&] { read_idx(path("corrupt.gz")); },
                              {path("corrupt.gz"), "corrupt"});
}

TEST_F(DatasetIdx, TrailingBytes) {
  for (bool gzip : {true, false}) {
    const std::string p = path(gzip ? "long.gz" : "long");
    write_file(p, idx_bytes(0x08, {2, 3}, Bytes(6 + 3, 1)), gzip);
    expect_error_containing_all([&] { read_idx(p); }, {p, "3 bytes after", "6 payload bytes"});
  }
}

// ---------------------------------------------------------------------------------------------
// Fashion-MNIST

using DatasetFashionMnist = TempDir;

// Writes a tiny split: n images whose pixel j of image i is (i * 31 + j) % 256, and labels.
void write_fake_split(const std::string& dir, const std::string& prefix, uint32_t n_images,
                      const Bytes& labels) {
  Bytes pixels(n_images * 28 * 28);
  for (size_t k = 0; k < pixels.size(); ++k)
    pixels[k] = static_cast<uint8_t>((k / 784) * 31 + k % 784);
  write_file(dir + "/" + prefix + "-images-idx3-ubyte.gz",
             idx_bytes(0x08, {n_images, 28, 28}, pixels), true);
  write_file(dir + "/" + prefix + "-labels-idx1-ubyte.gz",
             idx_bytes(0x08, {static_cast<uint32_t>(labels.size())}, labels), true);
}

TEST_F(DatasetFashionMnist, LoadsAndNormalizesTinyFiles) {
  write_fake_split(dir_.string(), "t10k", 3, {9, 0, 4});
  Dataset d = load_fashion_mnist(dir_.string(), Split::kTest);
  EXPECT_EQ(d.size, 3);
  EXPECT_EQ(d.num_classes, 10);
  EXPECT_EQ(d.sample_shape, (Shape{1, 28, 28}));
  EXPECT_EQ(d.labels, (std::vector<int32_t>{9, 0, 4}));
  ASSERT_EQ(d.images.size(), 3u * 784u);
  for (int64_t k : {int64_t{0}, int64_t{255}, int64_t{784 + 5}, int64_t{2 * 784 + 700}}) {
    const float pixel = static_cast<float>(((k / 784) * 31 + k % 784) % 256);
    const float expected = (pixel / 255.0f - 0.2860f) / 0.3530f;
    EXPECT_NEAR(d.images[k], expected, 1e-5) << "pixel " << k;
  }
  EXPECT_NO_THROW(d.check());
}

TEST_F(DatasetFashionMnist, CountMismatchNamesBothFiles) {
  write_fake_split(dir_.string(), "train", 5, {1, 2, 3, 4});
  expect_error_containing_all([&] { load_fashion_mnist(dir_.string(), Split::kTrain); },
                              {path("train-images-idx3-ubyte.gz"),
                               path("train-labels-idx1-ubyte.gz"), "5 images", "4 labels"});
}

TEST_F(DatasetFashionMnist, LabelOutOfRange) {
  write_fake_split(dir_.string(), "t10k", 2, {3, 10});
  expect_error_containing_all([&] { load_fashion_mnist(dir_.string(), Split::kTest); },
                              {path("t10k-labels-idx1-ubyte.gz"), "label 10", "index 1"});
}

TEST_F(DatasetFashionMnist, WrongImageShape) {
  write_file(path("t10k-images-idx3-ubyte.gz"), idx_bytes(0x08, {2, 28, 27}, Bytes(2 * 28 * 27)),
             true);
  write_file(path("t10k-labels-idx1-ubyte.gz"), idx_bytes(0x08, {2}, {0, 1}), true);
  expect_error_containing_all([&] { load_fashion_mnist(dir_.string(), Split::kTest); },
                              {path("t10k-images-idx3-ubyte.gz"), "[2, 28, 27]", "[n, 28, 28]"});
}

TEST_F(DatasetFashionMnist, MissingDirectoryOrFileSaysHowToInstall) {
  const std::string missing = path("nowhere");
  expect_error_containing_all([&] { load_fashion_mnist(missing, Split::kTrain); },
                              {missing, "apt-get install dataset-fashion-mnist"});
  write_fake_split(dir_.string(), "t10k", 2, {0, 1});
  fs::remove(path("t10k-labels-idx1-ubyte.gz"));
  expect_error_containing_all(
      [&] { load_fashion_mnist(dir_.string(), Split::kTest); },
      {path("t10k-labels-idx1-ubyte.gz"), "apt-get install dataset-fashion-mnist"});
}

TEST_F(DatasetFashionMnist, UncompressedFilesAlsoLoad) {
  write_file(path("t10k-images-idx3-ubyte"), idx_bytes(0x08, {1, 28, 28}, Bytes(784, 255)), false);
  write_file(path("t10k-labels-idx1-ubyte"), idx_bytes(0x08, {1}, {7}), false);
  Dataset d = load_fashion_mnist(dir_.string(), Split::kTest);
  EXPECT_EQ(d.size, 1);
  EXPECT_NEAR(d.images[0], (1.0f - 0.2860f) / 0.3530f, 1e-5);
}

void check_real_split(Split split, int64_t expected_size, double mean_tolerance) {
  if (!fs::is_directory(kFashionMnistDefaultDir))
    GTEST_SKIP() << kFashionMnistDefaultDir << " absent: apt-get install dataset-fashion-mnist";
  Dataset d = load_fashion_mnist(kFashionMnistDefaultDir, split);
  EXPECT_EQ(d.size, expected_size);
  EXPECT_EQ(d.sample_shape, (Shape{1, 28, 28}));
  std::vector<int64_t> per_class(10, 0);
  for (int32_t l : d.labels) {
    ASSERT_TRUE(l >= 0 && l < 10) << "label " << l;
    ++per_class[l];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], expected_size / 10) << "class " << c;
  double sum = 0.0, sum_sq = 0.0;
  for (float v : d.images) sum += v, sum_sq += double(v) * v;
  const double n = static_cast<double>(d.images.size());
  const double mean = sum / n, std = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_LT(std::fabs(mean), mean_tolerance);
  EXPECT_NEAR(std, 1.0, 0.02);
}

TEST(DatasetFashionMnistReal, TestSplit) { check_real_split(Split::kTest, 10000, 0.05); }
// The statistics are the training set's own, so there the mean is 0 to rounding of the constants.
TEST(DatasetFashionMnistReal, TrainSplit) { check_real_split(Split::kTrain, 60000, 0.002); }

// ---------------------------------------------------------------------------------------------
// Loader

// Sample i has every pixel equal to i and label i % 7, so a batch shows which samples it holds.
Dataset indexed_dataset(int64_t size) {
  Dataset d;
  d.name = "indexed";
  d.sample_shape = Shape{2, 3};
  d.size = size;
  d.num_classes = 7;
  for (int64_t i = 0; i < size; ++i) {
    d.images.insert(d.images.end(), 6, static_cast<float>(i));
    d.labels.push_back(static_cast<int32_t>(i % 7));
  }
  return d;
}

// Runs one epoch; returns the sample indices in visit order and each batch's row count.
std::vector<int64_t> run_epoch(Loader& loader, std::vector<int64_t>* rows_per_batch = nullptr) {
  Batch batch = loader.make_batch();
  std::vector<int64_t> seen;
  while (loader.next(batch)) {
    if (rows_per_batch) rows_per_batch->push_back(batch.rows);
    TensorView images = batch.images();
    IndexView labels = batch.labels();
    EXPECT_EQ(images.shape, (Shape{batch.rows, 2, 3}));
    EXPECT_EQ(labels.shape, (Shape{batch.rows}));
    for (int64_t r = 0; r < batch.rows; ++r) {
      const int64_t i = static_cast<int64_t>(images[r * 6]);
      for (int j = 1; j < 6; ++j) EXPECT_EQ(images[r * 6 + j], static_cast<float>(i));
      EXPECT_EQ(labels[r], i % 7) << "label does not belong to the image of sample " << i;
      seen.push_back(i);
    }
  }
  return seen;
}

TEST(DatasetLoader, EverySampleOncePerEpochWithPartialFinalBatch) {
  Dataset d = indexed_dataset(103);
  Loader loader(d, {.batch_size = 10, .shuffle = true, .seed = 5, .drop_last = false});
  EXPECT_EQ(loader.batches_per_epoch(), 11);
  EXPECT_EQ(loader.samples_per_epoch(), 103);
  for (int epoch = 0; epoch < 3; ++epoch) {
    EXPECT_EQ(loader.epoch(), epoch);
    std::vector<int64_t> rows;
    std::vector<int64_t> seen = run_epoch(loader, &rows);
    EXPECT_EQ(rows, (std::vector<int64_t>{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 3}));
    ASSERT_EQ(seen.size(), 103u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 103u) << "a sample repeated";
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_NE(seen, sorted) << "shuffle left the order unchanged";
  }
}

TEST(DatasetLoader, DropLastKeepsEveryBatchFull) {
  Dataset d = indexed_dataset(103);
  Loader loader(d, {.batch_size = 10, .seed = 5});
  EXPECT_EQ(loader.batches_per_epoch(), 10);
  EXPECT_EQ(loader.samples_per_epoch(), 100);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> rows;
    std::vector<int64_t> seen = run_epoch(loader, &rows);
    EXPECT_EQ(rows, std::vector<int64_t>(10, 10));
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 100u);
  }
  expect_error_containing_all([&] { Loader(d, {.batch_size = 104}); },
                              {"indexed", "103 samples", "104"});
  Loader whole(d, {.batch_size = 104, .drop_last = false});
  EXPECT_EQ(whole.batches_per_epoch(), 1);
  EXPECT_EQ(run_epoch(whole).size(), 103u);
}

TEST(DatasetLoader, OrderDependsOnlyOnSeedAndEpoch) {
  Dataset d = indexed_dataset(50);
  Loader a(d, {.batch_size = 5, .seed = 11}), b(d, {.batch_size = 5, .seed = 11});
  Loader other_seed(d, {.batch_size = 5, .seed = 12});
  std::vector<int64_t> a0 = run_epoch(a), a1 = run_epoch(a), a2 = run_epoch(a);
  EXPECT_EQ(run_epoch(b), a0);
  EXPECT_EQ(run_epoch(b), a1);
  EXPECT_NE(a0, a1);
  EXPECT_NE(a1, a2);
  EXPECT_NE(run_epoch(other_seed), a0);
  // Resuming at epoch 2 sees what a run that went through epochs 0 and 1 saw.
  Loader resumed(d, {.batch_size = 5, .seed = 11});
  resumed.start_epoch(2);
  EXPECT_EQ(run_epoch(resumed), a2);
}

TEST(DatasetLoader, NoShuffleIsSequential) {
  Dataset d = indexed_dataset(12);
  Loader loader(d, {.batch_size = 4, .shuffle = false});
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen = run_epoch(loader);
    std::vector<int64_t> expected(12);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(seen, expected);
  }
}

TEST(DatasetLoader, ItersPerEpochCapsTheEpoch) {
  Dataset d = indexed_dataset(100);
  Loader loader(d, {.batch_size = 8, .seed = 3, .iters_per_epoch = 3});
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  std::vector<int64_t> rows;
  std::vector<int64_t> seen = run_epoch(loader, &rows);
  EXPECT_EQ(rows, (std::vector<int64_t>{8, 8, 8}));
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 24u);
  EXPECT_EQ(loader.epoch(), 1);
  // A cap above the natural count changes nothing.
  Loader loose(d, {.batch_size = 8, .iters_per_epoch = 50});
  EXPECT_EQ(loose.batches_per_epoch(), 12);
  expect_error_containing_all([&] { Loader(d, {.batch_size = 8, .iters_per_epoch = -1}); },
                              {"iters_per_epoch"});
}

TEST(DatasetLoader, ViewOverloadAndBufferChecks) {
  Dataset d = indexed_dataset(7);
  Loader loader(d, {.batch_size = 4, .shuffle = false, .drop_last = false});
  std::vector<float> images(4 * 6, -1.0f);
  std::vector<int32_t> labels(4, -1);
  TensorView iv(images.data(), Shape{4, 2, 3});
  IndexView lv(labels.data(), Shape{4});
  EXPECT_EQ(loader.next(iv, lv), 4);
  EXPECT_EQ(loader.next(iv, lv), 3);
  EXPECT_EQ(images[2 * 6], 6.0f);
  EXPECT_EQ(labels[2], 6);
  EXPECT_EQ(loader.next(iv, lv), 0);
  expect_error_containing_all(
      [&] {
        loader.next(TensorView(images.data(), Shape{4, 6}), lv);
      },
      {"loader image buffer", "[4, 2, 3]"});
  Loader bigger(d, {.batch_size = 2});
  Batch wrong = bigger.make_batch();
  expect_error_containing_all([&] { loader.next(wrong); }, {"make_batch"});
}

// The shuffle against an independent expectation: over many epochs of an n-element dataset read
// in one batch, each of the n! orders is equally likely (Fisher-Yates with an unbiased index), the
// epochs are independent, and the same seed gives the same sequence of orders.
//
// Pearson's chi-square statistic of the n! order counts against the uniform distribution has
// n! - 1 degrees of freedom; it must stay below its upper 1e-6 quantile (computed in Python from
// the regularized upper incomplete gamma function, Q(df / 2, x / 2) = 1e-6, by bisection):
//   df = 5 (n = 3): 35.888,   df = 23 (n = 4): 70.550.
// A uniform shuffle exceeds it once in a million seeds. The classic biased shuffles are far
// beyond it at 12000 epochs: swapping with an index drawn from the whole range (n^n equally likely
// swap sequences, not a multiple of n!) gives an expected statistic of df + 148 (n = 3) and
// df + 357 (n = 4); leaving the last element in place, or Sattolo's j < i, reach a fraction of
// the orders only, a statistic in the thousands.
int64_t order_rank(const std::vector<int64_t>& order) {  // lexicographic rank (Lehmer code)
  int64_t rank = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    int64_t smaller_after = 0;
    for (size_t j = i + 1; j < order.size(); ++j) smaller_after += order[j] < order[i];
    int64_t factorial = 1;
    for (size_t k = 2; k < order.size() - i; ++k) factorial *= static_cast<int64_t>(k);
    rank += smaller_after * factorial;
  }
  return rank;
}

// The rank of each epoch's order over `epochs` epochs, read through the batches.
std::vector<int64_t> epoch_ranks(const Dataset& d, uint64_t seed, int64_t epochs) {
  Loader loader(d, {.batch_size = d.size, .seed = seed});
  std::vector<int64_t> ranks;
  for (int64_t e = 0; e < epochs; ++e) {
    const std::vector<int64_t> seen = run_epoch(loader);
    EXPECT_EQ(static_cast<int64_t>(seen.size()), d.size);
    ranks.push_back(order_rank(seen));
  }
  return ranks;
}

TEST(DatasetLoader, ShuffleIsUniformOverPermutationsAndIndependentAcrossEpochs) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const int64_t epochs = 12000;
  struct Case {
    int64_t n, orders;
    double chi2_limit;  // upper 1e-6 quantile of chi-square with orders - 1 degrees of freedom
  };
  for (const Case& c : {Case{3, 6, 35.888}, Case{4, 24, 70.550}}) {
    SCOPED_TRACE(fmt::format("n={}", c.n));
    const Dataset d = indexed_dataset(c.n);
    const std::vector<int64_t> ranks = epoch_ranks(d, seed, epochs);
    std::vector<int64_t> count(c.orders, 0);
    for (int64_t r : ranks) ++count[r];
    const double expected = double(epochs) / c.orders;
    double chi2 = 0.0;
    for (int64_t k : count) chi2 += (k - expected) * (k - expected) / expected;
    EXPECT_LT(chi2, c.chi2_limit) << "orders not uniform, counts: "
                                  << fmt::format("{}", fmt::join(count, " "));
    // Independent epochs: the next epoch repeats the order with probability 1 / n!. The count of
    // repeats is binomial; 5.3 standard deviations is a two-sided 1e-7 bound.
    int64_t repeats = 0;
    for (int64_t e = 1; e < epochs; ++e) repeats += ranks[e] == ranks[e - 1];
    const double p = 1.0 / c.orders, mean = (epochs - 1) * p;
    const double sd = std::sqrt((epochs - 1) * p * (1 - p));
    EXPECT_NEAR(double(repeats), mean, 5.3 * sd) << "consecutive epochs repeat their order";
    // The same seed reproduces every epoch's order; another seed gives another sequence.
    EXPECT_EQ(epoch_ranks(d, seed, 200), std::vector<int64_t>(ranks.begin(), ranks.begin() + 200));
    const std::vector<int64_t> other = epoch_ranks(d, seed + 1, 200);
    int64_t same = 0;
    for (int64_t e = 0; e < 200; ++e) same += other[e] == ranks[e];
    EXPECT_LT(same, 200 / c.orders * 3) << "another seed repeats the orders";
  }
}

TEST(DatasetLoader, RejectsBadLabels) {
  Dataset d = indexed_dataset(5);
  d.labels[3] = 7;
  expect_error_containing_all([&] { Loader(d, {.batch_size = 2}); },
                              {"indexed", "sample 3", "label 7"});
}

// ---------------------------------------------------------------------------------------------
// Synthetic

TEST(DatasetSynthetic, DeterministicWhateverTheThreadCount) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Dataset one = make_synthetic(Shape{3, 4, 4}, 5, 257, seed);
  omp_set_num_threads(std::max(2, threads));
  Dataset many = make_synthetic(Shape{3, 4, 4}, 5, 257, seed);
  omp_set_num_threads(threads);
  EXPECT_EQ(one.images, many.images);
  EXPECT_EQ(one.labels, many.labels);
  EXPECT_EQ(one.sample_shape, (Shape{3, 4, 4}));
  EXPECT_NO_THROW(one.check());
  Dataset other = make_synthetic(Shape{3, 4, 4}, 5, 257, seed + 1);
  EXPECT_NE(one.images, other.images);
  Dataset test_set = make_synthetic(Shape{3, 4, 4}, 5, 257, seed, {.sample_stream = 1});
  EXPECT_NE(one.images, test_set.images);
}

// Nearest class mean, fitted on stream 0 and scored on stream 1, separates the classes: the
// data is learnable, and both streams share the class means.
TEST(DatasetSynthetic, LearnableAcrossStreams) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const int C = 10;
  Dataset train = make_synthetic(Shape{1, 8, 8}, C, 2000, seed);
  Dataset test = make_synthetic(Shape{1, 8, 8}, C, 500, seed, {.sample_stream = 1});
  const int64_t D = train.sample_numel();
  std::vector<double> centroid(C * D, 0.0);
  std::vector<int64_t> count(C, 0);
  for (int64_t i = 0; i < train.size; ++i) {
    ++count[train.labels[i]];
    for (int64_t j = 0; j < D; ++j) centroid[train.labels[i] * D + j] += train.sample(i)[j];
  }
  for (int c = 0; c < C; ++c) {
    ASSERT_GT(count[c], 100) << "class " << c << " is rare: labels are not uniform";
    for (int64_t j = 0; j < D; ++j) centroid[c * D + j] /= count[c];
  }
  int64_t correct = 0;
  for (int64_t i = 0; i < test.size; ++i) {
    int best = 0;
    double best_dist = 1e300;
    for (int c = 0; c < C; ++c) {
      double dist = 0.0;
      for (int64_t j = 0; j < D; ++j) {
        const double diff = test.sample(i)[j] - centroid[c * D + j];
        dist += diff * diff;
      }
      if (dist < best_dist) best_dist = dist, best = c;
    }
    correct += best == test.labels[i];
  }
  EXPECT_GT(correct, test.size * 95 / 100) << correct << " of " << test.size << " correct";
}

TEST(DatasetSynthetic, RejectsBadArguments) {
  expect_error_containing_all([] { make_synthetic(Shape{4}, 0, 10, 1); }, {"class"});
  expect_error_containing_all([] { make_synthetic(Shape{4}, 3, 0, 1); }, {"sample"});
  expect_error_containing_all([] { make_synthetic(Shape{4, 0}, 3, 10, 1); }, {"[4, 0]"});
  expect_error_containing_all([] { make_synthetic(Shape{4}, 3, 10, 1, {.noise_std = -1.0f}); },
                              {"noise_std"});
}

TEST(Dataset, TakeFirst) {
  Dataset d = indexed_dataset(10);
  Dataset head = take_first(d, 4);
  EXPECT_EQ(head.size, 4);
  EXPECT_EQ(head.labels, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(head.images.size(), 24u);
  EXPECT_EQ(head.images[23], 3.0f);
  EXPECT_EQ(take_first(d, 100).size, 10);
}

}  // namespace
}  // namespace hfta
