// The CUDA embedding (fused_ops/cuda/embedding.cpp): B in {1, 2, 3, 8}; R token rows, V ids and D
// features from 1 to 257 around the 256-thread blocks; ids drawn from small vocabularies (many
// repeats), padding_idx on and off, every row padding.
//   EmbeddingGroups.* (runs without a GPU): the host's grouping of rows by id holds every
//     non-padding row once, groups in increasing id, rows in increasing order.
//   EmbeddingHostMirror (runs without a GPU): embedding_math.h over every index as the kernels
//     run it (y on NaN-filled outputs, dweight onto a random start), over the op's own grouping,
//     equals the CPU op bit for bit and the reference within the float sums' bound; model b of
//     the fused mirror equals the B = 1 mirror on model b's slice bit for bit.
//   CudaEmbedding (skipped without a GPU): the op through the dispatcher on device tensors, bit
//     for bit the CPU op; a bad id on the device raises. EmbeddingDevices: mixed devices raise.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "backend/cuda/device_arena.h"
#include "backend/cuda/runtime.h"
#include "core/device_memory.h"
#include "fused_ops/cuda/embedding_groups.h"
#include "fused_ops/cuda/embedding_math.h"
#include "fused_ops/embedding.h"
#include "test_util.h"

namespace hfta {
namespace {

using test::Buffer;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct EmbCase {
  EmbeddingParams p;
  bool all_padding = false;
  std::string name() const {
    return fmt::format("B{}_R{}_V{}_D{}{}{}", p.B, p.R, p.V, p.D,
                       p.padding_idx ? fmt::format("_pad{}", *p.padding_idx) : "",
                       all_padding ? "_allpad" : "");
  }
};

void PrintTo(const EmbCase& c, std::ostream* os) { *os << c.name(); }

std::vector<EmbCase> cases() {
  const struct {
    int64_t R, V, D;
    std::optional<int64_t> padding;
    bool all_padding;
  } shapes[] = {{1, 1, 1, {}, false},     {7, 3, 255, {}, false}, {40, 5, 256, 2, false},
                {9, 300, 257, {}, false}, {257, 4, 1, 0, false},  {35, 20, 33, 19, false},
                {6, 3, 17, 1, true}};
  std::vector<EmbCase> out;
  for (const auto& s : shapes)
    for (int64_t B : test::model_counts())
      out.push_back(
          {{.B = B, .R = s.R, .V = s.V, .D = s.D, .padding_idx = s.padding}, s.all_padding});
  return out;
}

struct Tensors {
  Buffer weight, dy, dweight_start;
  std::vector<int32_t> ids;
  IndexView id_view() { return IndexView(ids.data(), Shape{int64_t(ids.size())}); }
};

Tensors inputs(const EmbCase& c) {
  RngStream rng(test::case_seed("cuda_embedding_" + c.name()), 0);
  Tensors t{test::random_buffer(c.p.weight_shape(), rng), test::random_buffer(c.p.y_shape(), rng),
            test::random_buffer(c.p.weight_shape(), rng),
            std::vector<int32_t>(static_cast<size_t>(c.p.R))};
  for (auto& id : t.ids)
    id = c.all_padding ? static_cast<int32_t>(*c.p.padding_idx)
                       : static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.p.V)));
  return t;
}

struct Outputs {
  Buffer y, dweight;
};

Outputs cpu_op(const EmbCase& c, Tensors& t) {
  Outputs o{Buffer(c.p.y_shape(), kNaN), t.dweight_start};
  embedding_forward(c.p, {.weight = t.weight.view(), .ids = t.id_view(), .y = o.y.view()});
  embedding_backward(c.p, {.ids = t.id_view(), .dy = t.dy.view(), .dweight = o.dweight.view()});
  return o;
}

Outputs mirror(const EmbCase& c, Tensors& t) {
  const embedding_math::EmbShape s{.B = c.p.B, .R = c.p.R, .V = c.p.V, .D = c.p.D};
  Outputs o{Buffer(c.p.y_shape(), kNaN), t.dweight_start};
  for (int64_t e = 0; e < s.B * s.R * s.D; ++e)
    embedding_math::forward_at(s, t.weight.data(), t.ids.data(), o.y.data(), e);
  const cuda::EmbeddingGroups g =
      cuda::group_rows(t.ids.data(), s.R, s.V, c.p.padding_idx.value_or(-1));
  const std::vector<int32_t> block = g.packed();  // as the kernel reads it
  const int32_t *vocab = block.data(), *starts = vocab + g.groups(),
                *order = starts + g.groups() + 1;
  for (int64_t i = 0; i < g.groups() * s.B * s.D; ++i)
    embedding_math::dweight_at(s, vocab, starts, order, t.dy.data(), o.dweight.data(), i);
  return o;
}

TEST(EmbeddingGroups, EveryNonPaddingRowOnceInOrder) {
  const std::vector<int32_t> ids = {3, 0, 3, 1, 0, 3, 5, 1};
  for (int64_t padding : {-1, 0, 3}) {
    SCOPED_TRACE(padding);
    const cuda::EmbeddingGroups g = cuda::group_rows(ids.data(), 8, 6, padding);
    ASSERT_EQ(g.starts.size(), g.vocab.size() + 1);
    EXPECT_EQ(g.starts.front(), 0);
    EXPECT_EQ(g.starts.back(), static_cast<int32_t>(g.order.size()));
    std::vector<int> seen(ids.size(), 0);
    for (int64_t k = 0; k < g.groups(); ++k) {
      if (k > 0) {
        EXPECT_LT(g.vocab[k - 1], g.vocab[k]);
      }
      EXPECT_NE(g.vocab[k], padding);
      for (int32_t j = g.starts[k]; j < g.starts[k + 1]; ++j) {
        EXPECT_EQ(ids[g.order[j]], g.vocab[k]);
        if (j > g.starts[k]) {
          EXPECT_LT(g.order[j - 1], g.order[j]);
        }
        ++seen[g.order[j]];
      }
    }
    for (size_t r = 0; r < ids.size(); ++r) EXPECT_EQ(seen[r], ids[r] == padding ? 0 : 1) << r;
  }
}

class EmbeddingHostMirror : public ::testing::TestWithParam<EmbCase> {};

TEST_P(EmbeddingHostMirror, EqualsTheCpuOpAndTheReference) {
  const EmbCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_embedding_" + c.name()));
  Tensors t = inputs(c);
  const Outputs got = mirror(c, t);
  const Outputs want = cpu_op(c, t);
  test::expect_same_bits(got.y.values, want.y.values, "y");
  test::expect_same_bits(got.dweight.values, want.dweight.values, "dweight");
  // The reference sums in double and rounds once; float sums of at most R terms of |dy| <= 1
  // onto |start| <= 1 round at most R + 1 times.
  Outputs ref{Buffer(c.p.y_shape(), kNaN), t.dweight_start};
  ref::embedding_forward(c.p, {.weight = t.weight.view(), .ids = t.id_view(), .y = ref.y.view()});
  ref::embedding_backward(c.p,
                          {.ids = t.id_view(), .dy = t.dy.view(), .dweight = ref.dweight.view()});
  test::expect_same_bits(got.y.values, ref.y.values, "y against the reference");
  const double u = 1.0 / (1 << 24);
  test::expect_close(got.dweight.values.data(), ref.dweight.values.data(), got.dweight.numel(),
                     u * double((c.p.R + 2) * (c.p.R + 2)), 0.0, "dweight against the reference");
}

TEST_P(EmbeddingHostMirror, FusedEqualsEachModelAlone) {
  const EmbCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_embedding_" + c.name()));
  Tensors t = inputs(c);
  const Outputs fused = mirror(c, t);
  const int64_t per_w = c.p.V * c.p.D, per_y = c.p.R * c.p.D;
  for (int64_t b = 0; b < c.p.B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    EmbCase one = c;
    one.p.B = 1;
    auto slice = [&](const Buffer& from, int64_t per) {
      Buffer out(Shape{1, per});
      std::copy_n(from.values.begin() + b * per, per, out.values.begin());
      return out;
    };
    Tensors single{slice(t.weight, per_w), slice(t.dy, per_y), slice(t.dweight_start, per_w),
                   t.ids};
    const Outputs alone = mirror(one, single);
    test::expect_same_bits(alone.y.values, slice(fused.y, per_y).values, "y");
    test::expect_same_bits(alone.dweight.values, slice(fused.dweight, per_w).values, "dweight");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, EmbeddingHostMirror, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

class CudaEmbedding : public ::testing::TestWithParam<EmbCase> {};

TEST_P(CudaEmbedding, EqualsTheCpuOp) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const EmbCase& c = GetParam();
  HFTA_CASE_TRACE(test::case_seed("cuda_embedding_" + c.name()));
  Tensors t = inputs(c);
  const Outputs want = cpu_op(c, t);
  const Shape ws = c.p.weight_shape(), ys = c.p.y_shape(), is = c.p.ids_shape();
  const auto bytes = [](const Shape& s) {
    return cuda::DeviceArena::align_up(static_cast<size_t>(s.numel()) * sizeof(float));
  };
  cuda::DeviceArena arena(2 * bytes(ws) + 2 * bytes(ys) + bytes(is), "embedding test");
  const TensorView weight = arena.carve(ws), dweight = arena.carve(ws), y = arena.carve(ys),
                   dy = arena.carve(ys);
  const IndexView ids = arena.carve<int32_t>(is);
  cuda::copy_to_device(t.weight.view(), weight);
  cuda::copy_to_device(t.dweight_start.view(), dweight);
  cuda::copy_to_device(t.dy.view(), dy);
  cuda::copy_to_device(Buffer(ys, kNaN).view(), y);
  copy_view(t.id_view(), ids, "embedding test ids");
  embedding_forward(c.p, {.weight = weight, .ids = ids, .y = y});
  embedding_backward(c.p, {.ids = ids, .dy = dy, .dweight = dweight});
  Outputs got{Buffer(ys), Buffer(ws)};
  cuda::copy_to_host(y, got.y.view());
  cuda::copy_to_host(dweight, got.dweight.view());
  test::expect_same_bits(got.y.values, want.y.values, "y");
  test::expect_same_bits(got.dweight.values, want.dweight.values, "dweight");
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaEmbedding, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(CudaEmbeddingErrors, BadDeviceIdRaises) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << cuda::device_status();
  const EmbeddingParams p{.B = 2, .R = 3, .V = 5, .D = 4};
  cuda::DeviceArena arena(4096, "embedding errors");
  const TensorView weight = arena.carve(p.weight_shape()), y = arena.carve(p.y_shape());
  const IndexView ids = arena.carve<int32_t>(p.ids_shape());
  std::vector<int32_t> bad = {0, 5, 1};
  copy_view(IndexView(bad.data(), p.ids_shape()), ids, "embedding errors ids");
  test::expect_error_containing_all(
      [&] { embedding_forward(p, {.weight = weight, .ids = ids, .y = y}); },
      {"embedding id 5 at row 1", "outside [0, V=5)"});
  test::expect_error_containing_all(
      [&] { embedding_backward(p, {.ids = ids, .dy = y, .dweight = weight}); },
      {"embedding id 5 at row 1"});
}

TEST(EmbeddingDevices, TensorsOnTwoDevicesAreRefused) {
  const EmbeddingParams p{.B = 1, .R = 2, .V = 3, .D = 2};
  std::vector<float> weight(6), y(4);
  std::vector<int32_t> ids = {0, 2};
  const TensorView on_device(y.data(), p.y_shape(), Device::kCuda);
  test::expect_error_containing_all(
      [&] {
        embedding_forward(p, {.weight = TensorView(weight.data(), p.weight_shape()),
                              .ids = IndexView(ids.data(), p.ids_shape()),
                              .y = on_device});
      },
      {"embedding output", "CUDA device"});
  const TensorView dweight(weight.data(), p.weight_shape(), Device::kCuda);
  test::expect_error_containing_all(
      [&] {
        embedding_backward(p, {.ids = IndexView(ids.data(), p.ids_shape()),
                               .dy = TensorView(y.data(), p.y_shape()),
                               .dweight = dweight});
      },
      {"embedding weight gradient", "CUDA device"});
}

}  // namespace
}  // namespace hfta
