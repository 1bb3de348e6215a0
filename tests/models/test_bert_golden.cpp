// BERT against PyTorch: HFTA's examples/bert module built unfused (benchmarks/torch_models.py's
// Bert) from hfta's own initial weights (`hfta export --init --arch bert`, seed 7), dropout 0, on
// the masked windows of torch_models.fixed_mlm: 3 training steps and the eval loss after them
// (hidden 64, 2 layers), and the first step at the example's size (hidden 512, 8 layers, 8 heads,
// FF 2048), within 1e-4 relative with Adam and Adadelta. PyTorch's numbers are in
// golden/torch_losses.txt (benchmarks/torch_golden.py), so this test needs no PyTorch. Model 0 of
// a fused pair gives them too.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "models/masked_lm.h"
#include "optim/adadelta.h"
#include "optim/adam.h"

namespace hfta {
namespace {

constexpr uint64_t kSeed = 7;
constexpr double kRtol = 1e-4;

using Key = std::tuple<std::string, std::string, std::string, int>;  // name, optimizer, phase, step

struct Golden {
  std::map<Key, double> loss;
  std::map<std::pair<std::string, std::string>, float> lr;
};

Golden read_golden() {
  const std::string path = std::string(HFTA_SOURCE_DIR) + "/tests/models/golden/torch_losses.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  Golden out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    std::string name, optimizer, phase;
    int step = 0;
    float lr = 0;
    double loss = 0;
    row >> name >> optimizer >> lr >> phase >> step >> loss;
    out.loss[{name, optimizer, phase, step}] = loss;
    out.lr[{name, optimizer}] = lr;
  }
  return out;
}

struct Sizes {
  const char* name;
  int64_t words, emsize, nhid, nlayers, nhead, streams, bptt;
  int steps;
  bool eval;
};

// torch_models.fixed_mlm as [S, T].
struct Window {
  std::vector<int32_t> x, pos, seg, y;
  void fill(int step, const Sizes& z) {
    x.clear(), pos.clear(), seg.clear(), y.clear();
    for (int64_t s = 0; s < z.streams; ++s)
      for (int64_t t = 0; t < z.bptt; ++t) {
        const auto tok = static_cast<int32_t>((13 * s + 7 * t + 3 * step + s * t) % z.words);
        const bool chosen = (s + t + step) % 3 == 0;
        x.push_back(chosen && (s + t) % 2 == 0 ? static_cast<int32_t>(z.words) : tok);
        pos.push_back(static_cast<int32_t>(t));
        seg.push_back(2 * t >= z.bptt ? 1 : 0);
        y.push_back(chosen ? tok : kIgnoreTarget);
      }
  }
  MlmBatch batch(const Sizes& z) {
    const Shape s{z.streams, z.bptt};
    return {IndexView(x.data(), s), IndexView(pos.data(), s), IndexView(seg.data(), s),
            IndexView(y.data(), s)};
  }
};

class BertGolden : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(BertGolden, LossesMatchPyTorch) {
  static const Sizes kSizes[] = {{"bert", 50, 64, 256, 2, 2, 4, 8, 3, true},
                                 {"bert_default", 50, 512, 2048, 8, 8, 4, 32, 1, false}};
  const Sizes& z = kSizes[std::get<0>(GetParam())];
  const std::string optimizer = std::get<1>(GetParam());
  const Golden golden = read_golden();
  auto lr = golden.lr.find({z.name, optimizer});
  ASSERT_NE(lr, golden.lr.end()) << "no golden run: run benchmarks/torch_golden.py";
  // The default size runs model 0 alone (its pair would double an already slow test).
  for (int64_t B : z.eval ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1}) {
    SCOPED_TRACE(fmt::format("{} {} B={} (model 0 compared)", z.name, optimizer, B));
    auto model = make_masked_lm("bert",
                                {.B = B,
                                 .streams = z.streams,
                                 .seed = kSeed,
                                 .config = {.vocab = z.words + 1,
                                            .emsize = z.emsize,
                                            .nhid = z.nhid,
                                            .nlayers = z.nlayers,
                                            .nhead = z.nhead,
                                            .bptt = z.bptt,
                                            .dropout = 0.0f}},
                                /*predicted_per_stream=*/z.bptt);  // masked-only output
    std::vector<TensorView> values;
    for (const Param& p : model->params()) values.push_back(p.value);
    ParamTable table = ParamTable::from_arena(model->net().param_arena(), values);
    std::unique_ptr<Optimizer> opt;
    if (optimizer == "adam")
      opt = std::make_unique<FusedAdam>(std::move(table), AdamHyper{.lr = {lr->second}});
    else
      opt = std::make_unique<FusedAdadelta>(std::move(table), AdadeltaHyper{.lr = {lr->second}});
    auto expect_loss = [&](const std::string& phase, int step) {
      auto it = golden.loss.find({z.name, optimizer, phase, step});
      ASSERT_NE(it, golden.loss.end()) << "no golden " << phase << " loss for step " << step;
      const double ours = model->losses()[0];
      EXPECT_NEAR(ours, it->second, kRtol * std::fabs(it->second))
          << phase << " step " << step << ": hfta " << ours << " PyTorch " << it->second;
    };
    Window w;
    for (int step = 0; step < z.steps; ++step) {
      w.fill(step, z);
      model->forward(w.batch(z), true);
      expect_loss("train", step + 1);
      model->backward();
      opt->step(model->net().param_arena(), model->net().grad_arena());
    }
    if (z.eval) {
      w.fill(z.steps, z);
      model->forward(w.batch(z), false);
      expect_loss("eval", z.steps + 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SizesAndOptimizers, BertGolden,
                         ::testing::Combine(::testing::Values(0, 1),
                                            ::testing::Values("adam", "adadelta")));

}  // namespace
}  // namespace hfta
