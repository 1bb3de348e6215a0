// The PyTorch golden losses (tests/models/golden/torch_losses.txt, written by
// benchmarks/torch_golden.py) and the fixed batches and optimizers they were made with: shared by
// the CPU models' test (test_torch_golden.cpp) and the CUDA models'
// (tests/cuda/test_cuda_model.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "models/model.h"
#include "optim/adadelta.h"
#include "optim/adam.h"
#include "sanitizer.h"

namespace hfta::test {

constexpr uint64_t kSeed = 7;
constexpr int64_t kBatch = 32, kSteps = 3, kClasses = 10;
// Sanitizer builds compile at -O1 (tests/sanitizer.h), where `omp simd` reductions run in order
// instead of in vector lanes: after 3 Adadelta steps MobileNetV2's loss differs from the release
// build's by 3e-4 relative. There the bound only keeps the math recognisable; the release suite
// holds the tight one.
constexpr double kRtol = kSanitized ? 2e-3 : 1e-4;

struct GoldenKey {
  std::string model, optimizer, phase;
  int step;
  auto operator<=>(const GoldenKey&) const = default;
};

struct Golden {
  std::map<GoldenKey, double> loss;
  std::map<std::pair<std::string, std::string>, float> lr;  // (model, optimizer) -> lr
};

inline Golden read_golden() {
  const std::string path = std::string(HFTA_SOURCE_DIR) + "/tests/models/golden/torch_losses.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  Golden out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    GoldenKey k;
    double loss = 0;
    float lr = 0;
    row >> k.model >> k.optimizer >> lr >> k.phase >> k.step >> loss;
    EXPECT_FALSE(row.fail()) << "malformed line in " << path << ": " << line;
    out.loss[k] = loss;
    out.lr[{k.model, k.optimizer}] = lr;
  }
  return out;
}

// torch_models.fixed_batch: element i of sample n is sin(0.05 (i+1)(n+1) + 0.3 step), its label
// (7n + 3 step) mod classes.
inline void fixed_batch(int step, const Shape& sample, std::vector<float>& x,
                        std::vector<int32_t>& y) {
  const int64_t per = sample.numel();
  x.resize(static_cast<size_t>(kBatch * per));
  y.resize(static_cast<size_t>(kBatch));
  for (int64_t n = 0; n < kBatch; ++n) {
    for (int64_t i = 0; i < per; ++i)
      x[static_cast<size_t>(n * per + i)] = static_cast<float>(
          std::sin(0.05 * static_cast<double>(i + 1) * static_cast<double>(n + 1) + 0.3 * step));
    y[static_cast<size_t>(n)] = static_cast<int32_t>((7 * n + 3 * step) % kClasses);
  }
}

inline std::unique_ptr<Optimizer> make_optimizer(const std::string& kind, const Model& model,
                                                 float lr) {
  std::vector<TensorView> values;
  for (const Param& p : model.params()) values.push_back(p.value);
  ParamTable table = ParamTable::from_arena(model.param_arena(), values);
  if (kind == "adam") return std::make_unique<FusedAdam>(std::move(table), AdamHyper{.lr = {lr}});
  return std::make_unique<FusedAdadelta>(std::move(table), AdadeltaHyper{.lr = {lr}});
}

}  // namespace hfta::test
