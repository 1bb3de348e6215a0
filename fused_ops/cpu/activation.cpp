// CPU fused activations.
//
// Parallelization: elementwise work has no model structure, so the whole tensor is one flat
// range split over the threads; B plays no role.
// - ReLU / LeakyReLU: our own loops over 16K-element chunks spread by parallel_for; `omp simd`
//   lets them vectorize also when y aliases x (in place). They are memory-bound.
// - GELU / Tanh / Sigmoid: oneDNN eltwise primitives (JIT, AVX-512, threaded with the shared
//   OpenMP pool) on the tensor viewed as one flat vector: an order of magnitude faster than an
//   OpenMP loop over std::erf / std::tanh / std::exp, which glibc does not vectorize without
//   -ffast-math. Creating the primitive descriptor each call is cheap next to the work (oneDNN
//   caches the primitive itself), so we keep no cache of our own. Numbers: docs/benchmarks.md,
//   'Measurements behind code choices'. oneDNN's ReLU is not used because it maps NaN to 0.
//   With accumulate_dx, oneDNN writes the gradient into a per-thread scratch buffer (kept
//   between calls, as large as the largest such dx) that is then added to dx.
#include "fused_ops/activation.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "core/parallel.h"

namespace hfta::cpu {

namespace {

dnnl::algorithm forward_algorithm(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kGelu:
      return dnnl::algorithm::eltwise_gelu_erf;
    case ActivationKind::kTanh:
      return dnnl::algorithm::eltwise_tanh;
    default:
      return dnnl::algorithm::eltwise_logistic;
  }
}

// The backward algorithm matching ActivationParams::backward_reads_output().
dnnl::algorithm backward_algorithm(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kGelu:
      return dnnl::algorithm::eltwise_gelu_erf;
    case ActivationKind::kTanh:
      return dnnl::algorithm::eltwise_tanh_use_dst_for_bwd;
    default:
      return dnnl::algorithm::eltwise_logistic_use_dst_for_bwd;
  }
}

dnnl::eltwise_forward::primitive_desc forward_pd(ActivationKind kind,
                                                 const dnnl::memory::desc& md) {
  return dnnl::eltwise_forward::primitive_desc(
      {dnnl::prop_kind::forward_training, forward_algorithm(kind), md, 0.0f}, dnnl_engine());
}

void onednn_forward(ActivationKind kind, const TensorView& x, const TensorView& y) {
  auto md = plain_desc({x.numel()});
  dnnl::memory mx(md, dnnl_engine(), x.data), my(md, dnnl_engine(), y.data);
  dnnl::eltwise_forward(forward_pd(kind, md))
      .execute(dnnl_stream(), {{DNNL_ARG_SRC, mx}, {DNNL_ARG_DST, my}});
  dnnl_stream().wait();
}

void onednn_backward(ActivationKind kind, const TensorView& x_or_y, bool is_output,
                     const TensorView& dy, const TensorView& dx) {
  auto md = plain_desc({dy.numel()});
  dnnl::eltwise_backward::primitive_desc pd({backward_algorithm(kind), md, md, 0.0f}, dnnl_engine(),
                                            forward_pd(kind, md));
  dnnl::memory mv(md, dnnl_engine(), x_or_y.data), mdy(md, dnnl_engine(), dy.data),
      mdx(md, dnnl_engine(), dx.data);
  dnnl::eltwise_backward(pd).execute(dnnl_stream(), {{is_output ? DNNL_ARG_DST : DNNL_ARG_SRC, mv},
                                                     {DNNL_ARG_DIFF_DST, mdy},
                                                     {DNNL_ARG_DIFF_SRC, mdx}});
  dnnl_stream().wait();
}

// ReLU6 (MobileNetV2): branch-free selects, as the ReLU loops below; `v < 0` and `v > 6` are
// false for NaN, which passes through as in PyTorch.
void relu6_forward(const float* xs, float* ys, int64_t n) {
  for_each_chunk(n, [xs, ys](int64_t begin, int64_t end) {
    const float* __restrict in = xs;
    float* __restrict out = ys;
    for (int64_t i = begin; i < end; ++i) {
      const float v = in[i], low = v < 0.0f ? 0.0f : v;
      out[i] = v > 6.0f ? 6.0f : low;
    }
  });
}

// dx = dy where 0 < y < 6 (the input was inside the linear range), else 0.
void relu6_backward(const float* ys, const float* gs, float* out, int64_t n, bool accumulate) {
  for_each_chunk(n, [ys, gs, out, accumulate](int64_t begin, int64_t end) {
    const float* __restrict v = ys;
    const float* __restrict g = gs;
    float* __restrict o = out;
    if (accumulate) {
      for (int64_t i = begin; i < end; ++i) o[i] += v[i] > 0.0f && v[i] < 6.0f ? g[i] : 0.0f;
    } else {
      for (int64_t i = begin; i < end; ++i) o[i] = v[i] > 0.0f && v[i] < 6.0f ? g[i] : 0.0f;
    }
  });
}

// Hardswish and Hardsigmoid (MobileNetV3): PyTorch's float operations in PyTorch's order
// (fused_ops/activation.h), as branch-free selects that GCC vectorizes; `t < 0` and `6 < t` are
// false for NaN, which passes through as with std::max / std::min. The division by 6 stays a
// division (a multiply by 1/6 rounds differently).
void hard_forward(ActivationKind kind, const float* xs, float* ys, int64_t n) {
  const bool swish = kind == ActivationKind::kHardswish;
  for_each_chunk(n, [xs, ys, swish](int64_t begin, int64_t end) {
    const float* __restrict in = xs;
    float* __restrict out = ys;
    if (swish) {
      for (int64_t i = begin; i < end; ++i) {
        const float v = in[i], t = v + 3.0f, low = t < 0.0f ? 0.0f : t, r = 6.0f < low ? 6.0f : low;
        out[i] = v * r / 6.0f;
      }
    } else {
      for (int64_t i = begin; i < end; ++i) {
        const float t = in[i] + 3.0f, low = t < 0.0f ? 0.0f : t, r = 6.0f < low ? 6.0f : low;
        out[i] = r / 6.0f;
      }
    }
  });
}

// From x (backward_reads_output() is false for both): hardswish' = 0 below -3, x / 3 + 0.5 on
// [-3, 3), 1 from 3 on (NaN for NaN); hardsigmoid' = 1/6 on (-3, 3), 0 elsewhere. Compiled without
// FMA contraction, so dx += dy * f' rounds the product first, as PyTorch does.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
template <bool kSwish, bool kAccumulate>
void hard_backward_chunk(const float* __restrict vs, const float* __restrict gs,
                         float* __restrict os, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float v = vs[i], g = gs[i];
    float d;
    if constexpr (kSwish) {
      const float mid = g * (v / 3.0f + 0.5f), high = v >= 3.0f ? g : mid;
      d = v < -3.0f ? 0.0f : high;
    } else {
      const float inside = g * (1.0f / 6.0f);
      d = v > -3.0f && v < 3.0f ? inside : 0.0f;
    }
    if constexpr (kAccumulate) {
      os[i] += d;
    } else {
      os[i] = d;
    }
  }
}
#pragma GCC pop_options

}  // namespace

void activation_forward(const ActivationParams& p, const ActivationForwardArgs& a) {
  const TensorView &x = a.x, &y = a.y;
  const int64_t n = x.numel();
  if (n == 0) return;
  if (p.kind == ActivationKind::kRelu6) return relu6_forward(x.data, y.data, n);
  if (p.kind == ActivationKind::kHardswish || p.kind == ActivationKind::kHardsigmoid)
    return hard_forward(p.kind, x.data, y.data, n);
  if (p.kind != ActivationKind::kRelu && p.kind != ActivationKind::kLeakyRelu)
    return onednn_forward(p.kind, x, y);
  // ReLU is LeakyReLU with slope 0; `v < 0` is false for NaN, which passes through.
  const float slope = p.kind == ActivationKind::kRelu ? 0.0f : p.negative_slope;
  // Branch-free selects over values copied into the chunk body, so GCC vectorizes: with the
  // closure's references and `v < 0 ? slope * v : v` it kept a scalar compare-and-branch per
  // element, which conv outputs (random signs) mispredict half the time (LeNet's first ReLU ran
  // an order of magnitude slower; see docs/benchmarks.md, 'Measurements behind code choices').
  // ReLU selects 0 rather than multiplying, so -inf gives 0.
  for_each_chunk(n, [xs = x.data, ys = y.data, slope_copy = slope](int64_t begin, int64_t end) {
    const float* __restrict in = xs;
    float* __restrict out = ys;
    // A local: read through the closure, the slope is reloaded after every store (the stores
    // might change it, as GCC sees it), the loop stays scalar and LeakyReLU ran 20x slower
    // than ReLU on DCGAN's discriminator.
    const float slope = slope_copy;
    if (slope == 0.0f) {
      for (int64_t i = begin; i < end; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
    } else {
      for (int64_t i = begin; i < end; ++i) {
        const float v = in[i], scaled = slope * v;
        out[i] = v < 0.0f ? scaled : v;
      }
    }
  });
}

// No FMA contraction in the backward: GCC vectorizes `dx += x > 0 ? g : slope * g` as a select
// and an add but contracts the scalar remainder into one fma(slope, g, dx), so an element's
// rounding depended on where it fell in the tensor, and a fused array (models side by side)
// differed from the model alone in the last bit wherever the remainder fell (seen with 8-lane
// AVX2 vectors).
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
void activation_backward(const ActivationParams& p, const ActivationBackwardArgs& a) {
  const TensorView &x = a.x, &y = a.y, &dy = a.dy, &dx = a.dx;
  const int64_t n = dy.numel();
  if (n == 0) return;
  const bool from_y = p.backward_reads_output();
  if (p.kind == ActivationKind::kRelu6)
    return relu6_backward(y.data, dy.data, dx.data, n, a.accumulate_dx);
  if (p.kind == ActivationKind::kHardswish || p.kind == ActivationKind::kHardsigmoid) {
    const bool swish = p.kind == ActivationKind::kHardswish, accumulate = a.accumulate_dx;
    for_each_chunk(
        n, [v = x.data, g = dy.data, o = dx.data, swish, accumulate](int64_t begin, int64_t end) {
          if (swish && accumulate) return hard_backward_chunk<true, true>(v, g, o, begin, end);
          if (swish) return hard_backward_chunk<true, false>(v, g, o, begin, end);
          if (accumulate) return hard_backward_chunk<false, true>(v, g, o, begin, end);
          hard_backward_chunk<false, false>(v, g, o, begin, end);
        });
    return;
  }
  if (p.kind != ActivationKind::kRelu && p.kind != ActivationKind::kLeakyRelu) {
    if (!a.accumulate_dx) return onednn_backward(p.kind, from_y ? y : x, from_y, dy, dx);
    thread_local std::vector<float> scratch;
    if (static_cast<int64_t>(scratch.size()) < n) scratch.resize(n);
    onednn_backward(p.kind, from_y ? y : x, from_y, dy, TensorView(scratch.data(), dy.shape));
    for_each_chunk(n, [from = scratch.data(), to = dx.data](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) to[i] += from[i];
    });
    return;
  }
  const float slope = p.kind == ActivationKind::kRelu ? 0.0f : p.negative_slope;
  const float* v = from_y ? y.data : x.data;  // same sign as x when slope >= 0
  const bool accumulate = a.accumulate_dx;
  for_each_chunk(n, [v, g = dy.data, out = dx.data, slope_copy = slope, accumulate](int64_t begin,
                                                                                    int64_t end) {
    const float* __restrict vs = v;
    const float* __restrict gs = g;
    float* __restrict os = out;
    const float slope = slope_copy;  // a local, as in the forward
    if (slope == 0.0f && accumulate) {
      for (int64_t i = begin; i < end; ++i) os[i] += vs[i] > 0.0f ? gs[i] : 0.0f;
    } else if (slope == 0.0f) {
      for (int64_t i = begin; i < end; ++i) os[i] = vs[i] > 0.0f ? gs[i] : 0.0f;
    } else if (accumulate) {
      for (int64_t i = begin; i < end; ++i) {
        const float gi = gs[i], scaled = slope * gi;
        os[i] += vs[i] > 0.0f ? gi : scaled;
      }
    } else {
      for (int64_t i = begin; i < end; ++i) {
        const float gi = gs[i], scaled = slope * gi;
        os[i] = vs[i] > 0.0f ? gi : scaled;
      }
    }
  });
}
#pragma GCC pop_options

}  // namespace hfta::cpu
