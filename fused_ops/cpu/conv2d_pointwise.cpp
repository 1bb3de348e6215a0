// Pointwise convolutions as GEMMs on the plain NCHW buffers (conv2d_pointwise.h).
#include "fused_ops/cpu/conv2d_pointwise.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/runtime.h"
#include "core/parallel.h"

namespace hfta::cpu {

namespace {

// Where one image of one model starts in the fused buffers (floats), and the GEMMs' sizes.
struct Layout {
  int64_t N, B, I, O, P;
  int64_t x_image, x_model;  // between images of x, between models' channel slices (0: shared)
  int64_t y_image, y_model;

  explicit Layout(const Conv2dParams& p)
      : N(p.N),
        B(p.B),
        I(p.in_channels),
        O(p.out_channels),
        P(p.H * p.W),
        x_image((p.shared_input ? 1 : p.B) * p.in_channels * p.H * p.W),
        x_model(p.shared_input ? 0 : p.in_channels * p.H * p.W),
        y_image(p.B * p.out_channels * p.H * p.W),
        y_model(p.out_channels * p.H * p.W) {}
  int64_t x_at(int64_t n, int64_t b) const { return n * x_image + b * x_model; }
  int64_t y_at(int64_t n, int64_t b) const { return n * y_image + b * y_model; }
};

// dweight[b] += dY_n X_n^T (or = with `accumulate` false) over the images of each model, cut into
// kWeightChunks ranges of images: chunk 0 adds into (or writes) dweight, the others into a scratch
// that is added after them in chunk order. Each per-image GEMM is small, so one call per image on
// every thread beats splitting each call's rows or threading inside it; and with a fixed number of
// chunks (as the depthwise and direct kernels' fixed image ranges) a model's bits depend neither on
// B nor on the thread count. The models go in rounds of enough (model, chunk) tasks for every
// thread, so the scratch grows with the threads, not with B.
constexpr int64_t kWeightChunks = 4;

void add_weight_gradient(const Layout& l, const float* x, const float* dy, float* dweight,
                         bool accumulate) {
  const int64_t chunks = std::min(l.N, kWeightChunks);
  const int64_t size = l.O * l.I;  // one model's weight
  const int64_t per_round = std::clamp<int64_t>((num_threads() + chunks - 1) / chunks, 1, l.B);
  thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < (chunks - 1) * per_round * size)
    scratch.resize(static_cast<size_t>((chunks - 1) * per_round * size));
  float* partial = scratch.data();
  for (int64_t first_model = 0; first_model < l.B; first_model += per_round) {
    const int64_t models = std::min(per_round, l.B - first_model);
    parallel_for(models * chunks, [&](int64_t task) {
      const int64_t m = task / chunks, c = task % chunks, b = first_model + m;
      const int64_t first = c * l.N / chunks, end = (c + 1) * l.N / chunks;
      float* to = c == 0 ? dweight + b * size : partial + ((c - 1) * per_round + m) * size;
      for (int64_t n = first; n < end; ++n)
        sgemm(false, true, l.O, l.I, l.P, 1.0f, dy + l.y_at(n, b), l.P, x + l.x_at(n, b), l.P,
              (c == 0 && accumulate) || n > first ? 1.0f : 0.0f, to, l.I);
    });
    float* dw = dweight + first_model * size;
    for_each_chunk(models * size, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t c = 1; c < chunks; ++c)
          dw[i] += partial[((c - 1) * per_round + i / size) * size + i % size];
    });
  }
}

}  // namespace

bool conv2d_pointwise_applies(const Conv2dParams& p) {
  return p.kernel_h == 1 && p.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
         p.pad_w == 0 && p.groups == 1 && p.H * p.W >= kMinPointwisePositions;
}

void conv2d_pointwise_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  const Layout l(p);
  parallel_for(l.N, [&](int64_t n) {
    for (int64_t b = 0; b < l.B; ++b) {
      float* y = a.y.data + l.y_at(n, b);
      sgemm(false, false, l.O, l.P, l.I, 1.0f, a.weight.data + b * l.O * l.I, l.I,
            a.x.data + l.x_at(n, b), l.P, 0.0f, y, l.P);
      if (!p.bias) continue;
      const float* bias = a.bias.data + b * l.O;
      for (int64_t o = 0; o < l.O; ++o)
        for (int64_t q = 0; q < l.P; ++q) y[o * l.P + q] += bias[o];
    }
  });
}

void conv2d_pointwise_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  const Layout l(p);
  if (!a.dx.empty()) {
    // A shared input's gradient sums the models, in model order, into each image's dx.
    parallel_for(l.N, [&](int64_t n) {
      for (int64_t b = 0; b < l.B; ++b) {
        const bool adds = a.accumulate_dx || (p.shared_input && b > 0);
        sgemm(true, false, l.I, l.P, l.O, 1.0f, a.weight.data + b * l.O * l.I, l.I,
              a.dy.data + l.y_at(n, b), l.P, adds ? 1.0f : 0.0f, a.dx.data + l.x_at(n, b), l.P);
      }
    });
  }
  if (!a.dweight.empty())
    add_weight_gradient(l, a.x.data, a.dy.data, a.dweight.data, a.accumulate_dparams);
  if (!p.bias || a.dbias.empty()) return;
  parallel_for(l.B * l.O, [&](int64_t row) {  // model b's channel o: row b*O + o of dbias
    const int64_t b = row / l.O, o = row % l.O;
    float sum = 0.0f;
    for (int64_t n = 0; n < l.N; ++n) {
      const float* dy = a.dy.data + l.y_at(n, b) + o * l.P;
      for (int64_t q = 0; q < l.P; ++q) sum += dy[q];
    }
    a.dbias.data[row] = a.accumulate_dparams ? a.dbias.data[row] + sum : sum;
  });
}

}  // namespace hfta::cpu
