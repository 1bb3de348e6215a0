// The model zoo's tiny command-line cases, shared by the CLI tests that run every model through
// the `hfta` binary (test_cli_matrix_slow.cpp, test_deterministic_slow.cpp): each model name, its
// kind, learning rates, and the data and size flags of `hfta train` that make a run take about a
// second on 2 cores.
#pragma once

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_files.h"

namespace hfta::cli_models {

namespace fs = std::filesystem;
using test::TempDir;

enum class Kind { kImage, kPoints, kLm, kMaskedLm, kGan };

struct ModelCase {
  std::string name;
  Kind kind;
  // Three learning rates: the first two train the B = 2 arrays, all three the plan runs.
  std::string lr2, lr3;
};

inline const std::vector<ModelCase>& model_cases() {
  static const std::vector<ModelCase> cases = {
      {"mlp", Kind::kImage, "0.001,0.004", "0.001,0.004,0.002"},
      {"lenet", Kind::kImage, "0.001,0.004", "0.001,0.004,0.002"},
      // The deep BatchNorm nets: small steps (their fp32 trajectories are chaotic at large ones).
      {"resnet18", Kind::kImage, "0.00001,0.00003", "0.00001,0.00003,0.00002"},
      {"mobilenetv2", Kind::kImage, "0.00001,0.00003", "0.00001,0.00003,0.00002"},
      {"mobilenetv3_small", Kind::kImage, "0.00001,0.00003", "0.00001,0.00003,0.00002"},
      {"mobilenetv3_large", Kind::kImage, "0.00001,0.00003", "0.00001,0.00003,0.00002"},
      {"pointnet_cls", Kind::kPoints, "0.001,0.002", "0.001,0.002,0.0005"},
      {"pointnet_cls_ft", Kind::kPoints, "0.001,0.002", "0.001,0.002,0.0005"},
      {"pointnet_seg", Kind::kPoints, "0.001,0.002", "0.001,0.002,0.0005"},
      {"pointnet_seg_ft", Kind::kPoints, "0.001,0.002", "0.001,0.002,0.0005"},
      {"transformer", Kind::kLm, "0.5,1", "0.5,1,2"},
      {"bert", Kind::kMaskedLm, "0.5,1", "0.5,1,2"},
      {"dcgan", Kind::kGan, "0.0001,0.0002", "0.0001,0.0002,0.0004"},
  };
  return cases;
}

inline const ModelCase& model_case(const std::string& name) {
  for (const ModelCase& c : model_cases())
    if (c.name == name) return c;
  throw std::runtime_error("no model case " + name);
}

inline bool is_classifier(Kind k) { return k == Kind::kImage || k == Kind::kPoints; }

// A small corpus (as tests/tasks/test_train_lm.cpp and test_train_bert.cpp write theirs):
// `lines` lines over a 30-word vocabulary.
inline std::string write_corpus(const fs::path& dir, int lines = 120) {
  const fs::path path = dir / "corpus.txt";
  std::ofstream out(path);
  for (int line = 0; line < lines; ++line) {
    for (int w = 0; w < 6 + line % 5; ++w) out << "w" << (line * 7 + w * 3) % 30 << " ";
    out << "\n";
  }
  return path.string();
}

// The data and size flags of `hfta train` / `hfta tune` for the model (no epochs, lr or --out).
// Language models need the corpus in `dir`.
inline std::string data_flags(const ModelCase& m, const TempDir& dir) {
  switch (m.kind) {
    case Kind::kImage:
      return "--dataset synthetic --synthetic-size 32 --synthetic-test-size 16 --batch-size 8";
    case Kind::kPoints:
      return "--dataset shapes --npoints 32 --synthetic-size 32 --synthetic-test-size 16 "
             "--batch-size 8";
    case Kind::kLm:
      return "--dataset text --text-files " + write_corpus(dir.path) +
             " --optimizer adadelta --emsize 8 --nhid 16 --nlayers 1 --nhead 2 --bptt 5 "
             "--batch-size 4";
    case Kind::kMaskedLm:
      return "--dataset text --text-files " + write_corpus(dir.path) +
             " --emsize 8 --nhid 16 --nlayers 1 --nhead 2 --bptt 5 --batch-size 4";
    case Kind::kGan:
      return "--dataset synthetic --image-size 8 --synthetic-size 16 --batch-size 4";
  }
  return "";
}

}  // namespace hfta::cli_models
