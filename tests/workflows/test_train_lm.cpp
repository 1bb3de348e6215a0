// `hfta train` for language models: fused == serial per model (same windows, same weights),
// the files it writes, and clear errors for bad options.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "workflows/train_lm.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;

// A small corpus: 60 lines over a 30-word vocabulary.
std::string write_corpus(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path path = dir / "corpus.txt";
  std::ofstream out(path);
  for (int line = 0; line < 60; ++line) {
    for (int w = 0; w < 6 + line % 5; ++w) out << "w" << (line * 7 + w * 3) % 30 << " ";
    out << "\n";
  }
  return path.string();
}

TrainOptions small_options(const fs::path& dir) {
  TrainOptions o;
  o.model = "transformer";
  o.dataset = "text";
  o.text_files = write_corpus(dir);
  o.optimizer = "adadelta";
  o.hyper["lr"] = {0.5f, 1.0f};
  o.emsize = 8;
  o.nhid = 16;
  o.nlayers = 1;
  o.nhead = 2;
  o.bptt = 5;
  o.batch_size = 4;
  o.epochs = 2;
  o.lr_gamma = {0.5f};
  o.progress = false;
  o.checkpoint = false;
  return o;
}

TEST(TrainLm, FusedEqualsSerialAndWritesResults) {
  const fs::path dir = fs::temp_directory_path() / "hfta_test_train_lm";
  fs::remove_all(dir);
  TrainOptions o = small_options(dir);
  o.out = (dir / "fused").string();
  const TrainResult fused = run_train_lm(o);
  o.serial = true;
  o.out = (dir / "serial").string();
  const TrainResult serial = run_train_lm(o);
  ASSERT_EQ(fused.models.size(), 2u);
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_TRUE(std::isfinite(fused.models[b].test_loss));
    EXPECT_NEAR(fused.models[b].final_train_loss, serial.models[b].final_train_loss,
                1e-4 * serial.models[b].final_train_loss);
    EXPECT_NEAR(fused.models[b].test_loss, serial.models[b].test_loss,
                1e-4 * serial.models[b].test_loss);
  }
  EXPECT_TRUE(fs::exists(dir / "fused" / "metrics.csv"));
  EXPECT_TRUE(fs::exists(dir / "fused" / "summary.csv"));
  fs::remove_all(dir);
}

TEST(TrainLm, BadOptionsNameTheProblem) {
  const fs::path dir = fs::temp_directory_path() / "hfta_test_train_lm_bad";
  fs::remove_all(dir);
  TrainOptions o = small_options(dir);
  o.out = (dir / "out").string();
  {
    TrainOptions bad = o;
    bad.bptt = 100000;  // longer than any split
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  {
    TrainOptions bad = o;
    bad.text_files.clear();
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  {
    TrainOptions bad = o;
    bad.clip = {0.25f, 0.5f, 1.0f};  // 3 values for 2 models
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  {
    TrainOptions bad = o;
    bad.nhead = 3;  // does not divide emsize 8
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  {
    TrainOptions bad = o;
    bad.text_files = (dir / "missing.txt").string();
    EXPECT_THROW(run_train_lm(bad), Error);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hfta
