// Small-plane convolutions as GEMMs on plain buffers (conv2d_im2col.h).
#include "fused_ops/cpu/conv2d_im2col.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/runtime.h"
#include "core/parallel.h"
#include "fused_ops/cpu/gemm_tasks.h"

namespace hfta::cpu {

namespace {

// Output planes of at most this many positions (2x2): beyond it oneDNN's kernels, which reuse
// each loaded weight over the plane, win.
constexpr int64_t kMaxPositions = 4;

// The problem's sizes, each model's place in the fused buffers (floats), and the kernel taps
// that read the input at some output position ("live"; a tap that only ever reads the padding
// multiplies zeros, and on a 1x1 plane with a 3x3 kernel only the centre tap is live).
struct Layout {
  int64_t N, I, O, H, W, HW, OH, OW, P, NP;
  int64_t taps;                 // kH*kW
  std::vector<int64_t> kh, kw;  // the taps the GEMMs take, in the weight's (kh, kw) order
  int64_t T, K;                 // live taps; the GEMMs' K = C_in*T
  // source[pos*T + t]: where in an input channel's plane tap t reads for output position pos
  // (ih*W + iw), or -1 in the padding; the im2col and its inverse walk this table rather than
  // recomputing each element's position (which cost more than the GEMMs on 1x1 planes).
  std::vector<int64_t> source;
  int64_t x_image, x_model;  // between images of x, between models' channel slices (0: shared)
  int64_t y_image, y_model;

  explicit Layout(const Conv2dParams& p)
      : N(p.N),
        I(p.in_channels),
        O(p.out_channels),
        H(p.H),
        W(p.W),
        HW(p.H * p.W),
        OH(p.out_h()),
        OW(p.out_w()),
        P(OH * OW),
        NP(p.N * OH * OW),
        taps(p.kernel_h * p.kernel_w),
        x_image((p.shared_input ? 1 : p.B) * p.in_channels * p.H * p.W),
        x_model(p.shared_input ? 0 : p.in_channels * p.H * p.W),
        y_image(p.B * p.out_channels * OH * OW),
        y_model(p.out_channels * OH * OW) {
    for (int64_t a = 0; a < p.kernel_h; ++a)
      for (int64_t b = 0; b < p.kernel_w; ++b) {
        bool live = false;
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t ih = oh * p.stride_h - p.pad_h + a * p.dilation_h;
            const int64_t iw = ow * p.stride_w - p.pad_w + b * p.dilation_w;
            live = live || (ih >= 0 && ih < H && iw >= 0 && iw < W);
          }
        if (!live) continue;
        kh.push_back(a);
        kw.push_back(b);
      }
    // The GEMMs take the live taps' weights, gathered, only when at most a third of the taps are
    // live (a 1x1 plane's 3x3 kernel: 1 of 9); with more, gathering the weight and scattering
    // its gradient back cost more than the zeros they save (4 of 9: docs/benchmarks.md, 'Small
    // planes as GEMMs'), and every tap goes in, the weight as it is.
    if (static_cast<int64_t>(kh.size()) * 3 > taps) {
      kh.clear();
      kw.clear();
      for (int64_t a = 0; a < p.kernel_h; ++a)
        for (int64_t b = 0; b < p.kernel_w; ++b) {
          kh.push_back(a);
          kw.push_back(b);
        }
    }
    T = static_cast<int64_t>(kh.size());
    K = I * T;
    source.resize(static_cast<size_t>(P * T));
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t t = 0; t < T; ++t) {
          const int64_t ih = oh * p.stride_h - p.pad_h + kh[t] * p.dilation_h;
          const int64_t iw = ow * p.stride_w - p.pad_w + kw[t] * p.dilation_w;
          const bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
          source[(oh * OW + ow) * T + t] = inside ? ih * W + iw : -1;
        }
  }
  // Whether the GEMMs take the live taps' weights (gathered) rather than the whole weight.
  bool compact() const { return T < taps; }
};

// Per calling thread, grown to the largest problem seen: the im2col, the GEMMs' [N*P, C_out]
// results / operands, the input gradient's columns, and the live taps' weights and their
// gradient (two buffers: backward's two GEMMs run side by side).
struct Scratch {
  std::vector<float> cols, out_cols, dx_cols, live_weights, live_grad;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}
float* sized(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// cols[n*P + pos, i*T + t] = x[n, i, ih, iw] (0 in the padding), x at model b's slice.
void build_cols(const Layout& l, const float* x, float* cols) {
  parallel_for(l.N, [&](int64_t n) {
    const float* xn = x + n * l.x_image;
    for (int64_t pos = 0; pos < l.P; ++pos) {
      float* row = cols + (n * l.P + pos) * l.K;
      const int64_t* from = l.source.data() + pos * l.T;
      if (l.T == 1) {  // one tap (1x1 kernels): a strided copy, on a 1x1 plane a contiguous one
        if (from[0] < 0)
          std::fill_n(row, l.I, 0.0f);
        else if (l.HW == 1)
          std::copy_n(xn, l.I, row);
        else
          for (int64_t i = 0; i < l.I; ++i) row[i] = xn[i * l.HW + from[0]];
        continue;
      }
      for (int64_t i = 0; i < l.I; ++i)
        for (int64_t t = 0; t < l.T; ++t) *row++ = from[t] >= 0 ? xn[i * l.HW + from[t]] : 0.0f;
    }
  });
}

// dx[n, i, ih, iw] += dx_cols[n*P + pos, i*T + t] over every position and tap that reads
// (ih, iw), in a fixed order (position, then tap); one image per task, so no two tasks touch one
// element.
void add_cols_to_input(const Layout& l, const float* dx_cols, float* dx) {
  parallel_for(l.N, [&](int64_t n) {
    float* dxn = dx + n * l.x_image;
    for (int64_t pos = 0; pos < l.P; ++pos) {
      const float* row = dx_cols + (n * l.P + pos) * l.K;
      const int64_t* from = l.source.data() + pos * l.T;
      if (l.T == 1) {
        if (from[0] < 0) continue;
        if (l.HW == 1)
          for (int64_t i = 0; i < l.I; ++i) dxn[i] += row[i];
        else
          for (int64_t i = 0; i < l.I; ++i) dxn[i * l.HW + from[0]] += row[i];
        continue;
      }
      for (int64_t i = 0; i < l.I; ++i)
        for (int64_t t = 0; t < l.T; ++t, ++row)
          if (from[t] >= 0) dxn[i * l.HW + from[t]] += *row;
    }
  });
}

// Model b's weight as the GEMMs' [C_out, C_in*T] operand: the weight itself when every tap is
// live, else its live taps' columns gathered into `out` (O*K floats).
const float* gather_weight(const Conv2dParams& p, const Layout& l, const float* w, float* out) {
  if (!l.compact()) return w;
  parallel_for(l.O, [&](int64_t o) {
    const float* wo = w + o * l.I * l.taps;
    float* to = out + o * l.K;
    for (int64_t i = 0; i < l.I; ++i)
      for (int64_t t = 0; t < l.T; ++t)
        to[i * l.T + t] = wo[i * l.taps + l.kh[t] * p.kernel_w + l.kw[t]];
  });
  return out;
}

// Model b's GEMM weight in forward: gathered into the caller's `saved` buffer when there is one
// (backward reads it back), else into the running thread's scratch.
const float* forward_weight(const Conv2dParams& p, const Layout& l, const Conv2dForwardArgs& a,
                            int64_t b, Scratch& s) {
  const float* w = a.weight.data + b * l.O * l.I * l.taps;
  if (!l.compact()) return w;
  float* out = a.saved.empty() ? sized(s.live_weights, l.O * l.K) : a.saved.data + b * l.O * l.K;
  return gather_weight(p, l, w, out);
}

// Model b's GEMM weight in backward: what forward saved, or gathered again.
const float* backward_weight(const Conv2dParams& p, const Layout& l, const Conv2dBackwardArgs& a,
                             int64_t b, Scratch& s) {
  const float* w = a.weight.data + b * l.O * l.I * l.taps;
  if (!l.compact()) return w;
  if (!a.saved.empty()) return a.saved.data + b * l.O * l.K;
  return gather_weight(p, l, w, sized(s.live_weights, l.O * l.K));
}

// The threads this call may use: one inside a task that already runs on one of them.
int64_t threads_here() { return omp_in_parallel() ? 1 : num_threads(); }

// Forward's GEMM runs in two blocks of output columns (where each gets at least 16), each a
// single-threaded GEMM: these GEMMs have a few dozen rows, where oneDNN's own threading gained
// little over one thread (docs/benchmarks.md, 'Small-plane GEMMs on two threads'). oneDNN does not
// compute a block as it computes those columns of the whole GEMM (N=32 960->160: 4,292 of 5,120
// outputs differ in their last bits), so the cut is fixed, whatever the threads, B or the plan:
// two threads run the blocks side by side, one thread (a threads plan's worker, a model of an
// array run one per thread) one after the other, with the same bits.
int64_t forward_blocks(const Layout& l) { return l.O >= 32 ? 2 : 1; }

// out[NP, C_out] = cols x W^T in `blocks` column blocks (forward_blocks).
void forward_gemm(const Layout& l, int64_t blocks, const float* cols, const float* w, float* out) {
  if (blocks == 1)  // threaded inside (one thread in deterministic mode)
    return sgemm(false, true, l.NP, l.O, l.K, 1.0f, cols, l.K, w, l.K, 0.0f, out, l.O);
  const int64_t block = ((l.O + blocks - 1) / blocks + 15) / 16 * 16;
  auto run_block = [&](int64_t t) {
    const int64_t c0 = std::min(l.O, t * block), width = std::min(l.O, c0 + block) - c0;
    if (width > 0)
      sgemm(false, true, l.NP, width, l.K, 1.0f, cols, l.K, w + c0 * l.K, l.K, 0.0f, out + c0, l.O);
  };
  if (threads_here() == 1)
    for (int64_t t = 0; t < blocks; ++t) run_block(t);
  else
    parallel_for(blocks, run_block);
}

// Runs the weight-gradient and the input-gradient GEMMs (equal in FLOPs) side by side, each on
// one thread, where there are two threads; each GEMM is whole, so its bits are those of one call
// on one thread. With more threads they run one after the other, each on all of them.
template <typename WeightGemm, typename InputGemm>
void backward_gemms(bool want_dw, bool want_dx, WeightGemm&& weight_gemm, InputGemm&& input_gemm) {
  if (want_dw && want_dx && threads_here() == 2) {
    parallel_for(2, [&](int64_t t) { t == 0 ? weight_gemm() : input_gemm(); });
    return;
  }
  if (want_dw) weight_gemm();
  if (want_dx) input_gemm();
}

// A shared input's im2col, built once in the caller's scratch for every model (nullptr for
// per-model inputs or when not needed).
const float* shared_input_cols(const Conv2dParams& p, const Layout& l, const float* x,
                               bool needed) {
  if (!p.shared_input || !needed) return nullptr;
  float* cols = sized(scratch().cols, l.NP * l.K);
  build_cols(l, x, cols);
  return cols;
}

// Model b's im2col: the shared one, or b's own built in the running thread's scratch.
const float* model_cols(const Layout& l, const float* shared, const float* x, int64_t b,
                        Scratch& s) {
  if (shared) return shared;
  float* own = sized(s.cols, l.NP * l.K);
  build_cols(l, x + b * l.x_model, own);
  return own;
}

// Zeroes dx (x's shape: every model's slice, or the shared input) before the models add to it.
void zero_input(const Layout& l, float* dx) {
  parallel_for(l.N, [&](int64_t n) { std::fill_n(dx + n * l.x_image, l.x_image, 0.0f); });
}

}  // namespace

int64_t conv2d_im2col_saved_floats(const Conv2dParams& p) {
  if (p.groups != 1 || p.out_h() * p.out_w() > kMaxPositions) return 0;  // never this path
  const Layout l(p);
  return l.compact() ? p.B * l.O * l.K : 0;
}

bool conv2d_im2col_applies(const Conv2dParams& p) {
  const int64_t positions = p.out_h() * p.out_w();
  const bool one_tap = p.kernel_h == 1 && p.kernel_w == 1;
  return p.groups == 1 && positions <= kMaxPositions &&
         (p.out_channels > p.N * positions || one_tap || !onednn_has_avx512_kernels());
}

void conv2d_im2col_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  const Layout l(p);
  const int64_t blocks = forward_blocks(l);
  const float* shared_cols = shared_input_cols(p, l, a.x.data, true);
  for_each_gemm_task(p.B, [&](int64_t b) {
    Scratch& s = scratch();  // the running thread's
    const float* cols = model_cols(l, shared_cols, a.x.data, b, s);
    float* out_cols = sized(s.out_cols, l.NP * l.O);
    const float* w = forward_weight(p, l, a, b, s);
    forward_gemm(l, blocks, cols, w, out_cols);
    const float* bias = p.bias ? a.bias.data + b * l.O : nullptr;
    parallel_for(l.N, [&](int64_t n) {
      float* yn = a.y.data + n * l.y_image + b * l.y_model;
      if (l.P == 1) {  // a 1x1 plane: the row is the image's channels
        const float* row = out_cols + n * l.O;
        if (bias)
          for (int64_t o = 0; o < l.O; ++o) yn[o] = row[o] + bias[o];
        else
          std::copy_n(row, l.O, yn);
        return;
      }
      for (int64_t pos = 0; pos < l.P; ++pos) {
        const float* row = out_cols + (n * l.P + pos) * l.O;
        for (int64_t o = 0; o < l.O; ++o) yn[o * l.P + pos] = bias ? row[o] + bias[o] : row[o];
      }
    });
  });
}

void conv2d_im2col_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  const Layout l(p);
  const bool want_dx = !a.dx.empty(), want_dw = !a.dweight.empty();
  const bool want_db = p.bias && !a.dbias.empty();
  if (want_dx && !a.accumulate_dx) zero_input(l, a.dx.data);
  const float* shared_cols = shared_input_cols(p, l, a.x.data, want_dw);
  auto backward_model = [&](int64_t b) {
    Scratch& s = scratch();  // the running thread's
    float* dy_cols = sized(s.out_cols, l.NP * l.O);
    float* dx_cols = want_dx ? sized(s.dx_cols, l.NP * l.K) : nullptr;
    const float* cols = want_dw ? model_cols(l, shared_cols, a.x.data, b, s) : nullptr;
    // dy_cols[n*P + pos, o] = dy[n, b*C_out + o, pos]
    parallel_for(l.N, [&](int64_t n) {
      const float* dyn = a.dy.data + n * l.y_image + b * l.y_model;
      if (l.P == 1) {
        std::copy_n(dyn, l.O, dy_cols + n * l.O);
        return;
      }
      for (int64_t pos = 0; pos < l.P; ++pos) {
        float* row = dy_cols + (n * l.P + pos) * l.O;
        for (int64_t o = 0; o < l.O; ++o) row[o] = dyn[o * l.P + pos];
      }
    });
    float* dw = want_dw ? a.dweight.data + b * l.O * l.I * l.taps : nullptr;
    // The live taps' gradient goes to scratch, then into theirs (the others' is zero); with every
    // tap live, straight into the caller's gradient.
    float* dw_gemm = want_dw && l.compact() ? sized(s.live_grad, l.O * l.K) : dw;
    const float dw_beta = want_dw && !l.compact() && a.accumulate_dparams ? 1.0f : 0.0f;
    const float* w = want_dx ? backward_weight(p, l, a, b, s) : nullptr;
    backward_gemms(
        want_dw, want_dx,
        [&] {
          sgemm(true, false, l.O, l.K, l.NP, 1.0f, dy_cols, l.O, cols, l.K, dw_beta, dw_gemm, l.K);
        },
        [&] {
          sgemm(false, false, l.NP, l.K, l.O, 1.0f, dy_cols, l.O, w, l.K, 0.0f, dx_cols, l.K);
        });
    if (want_dw && l.compact()) {
      parallel_for(l.O, [&](int64_t o) {
        float* dwo = dw + o * l.I * l.taps;
        if (!a.accumulate_dparams) std::fill(dwo, dwo + l.I * l.taps, 0.0f);
        const float* from = dw_gemm + o * l.K;
        for (int64_t i = 0; i < l.I; ++i)
          for (int64_t t = 0; t < l.T; ++t)
            dwo[i * l.taps + l.kh[t] * p.kernel_w + l.kw[t]] += from[i * l.T + t];
      });
    }
    if (want_db) {
      float* db = a.dbias.data + b * l.O;
      parallel_for(l.O, [&](int64_t o) {
        float sum = 0.0f;
        for (int64_t r = 0; r < l.NP; ++r) sum += dy_cols[r * l.O + o];
        db[o] = a.accumulate_dparams ? db[o] + sum : sum;
      });
    }
    if (want_dx) add_cols_to_input(l, dx_cols, a.dx.data + b * l.x_model);
  };
  // A shared input's gradient sums every model's: then the models run one after another.
  if (want_dx && p.shared_input)
    for (int64_t b = 0; b < p.B; ++b) backward_model(b);
  else
    for_each_gemm_task(p.B, backward_model);
}

}  // namespace hfta::cpu
