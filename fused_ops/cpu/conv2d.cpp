// CPU fused conv2d on oneDNN convolution primitives (direct algorithm, f32).
//
// Parallelization: none of our own; oneDNN threads each primitive over minibatch, groups and
// output-channel blocks with the shared OpenMP pool. What varies is how many primitives run:
// - grouped (the default): the B models are ONE convolution with B*groups groups (the
//   [N, B*C, H, W] layout makes that free); one big primitive keeps all threads busy even at B=1
//   and avoids B small calls. A shared input with groups == 1 is one ungrouped convolution with
//   B*C_out output channels, whose backward-data sums over models for free.
// - per model: B runs of the single-model primitive on strided channel views of x/y. Used when
//   oneDNN has only its im2col+gemm fallback for the grouped problem but a JIT kernel for one
//   model (channels per group not a multiple of the SIMD block), and for a shared input with
//   groups > 1, which cannot be one primitive (its output channels would interleave models within
//   each group); there dx sums the models through a reorder with a sum post-op.
// Both were measured on the 2-core AVX-512 machine; see tests/fused_ops/test_conv2d.cpp.
//
// Layouts: every primitive is created with format_tag::any and picks its fast (blocked) layout;
// our plain NCHW / [B, ...] buffers are reordered in and out at the edges of each call.
// Parameter gradients accumulate: oneDNN writes diff_weights / diff_bias into scratch memory,
// and a reorder with a sum post-op adds it to the caller's buffer.
//
// The op's one cache, by design: the primitives, their internal memories (blocked copies,
// gradient scratch, user-mode scratchpads) are created on the first call for a Conv2dParams and
// reused by every later call with the same params, so a training step allocates no buffers (only
// oneDNN's small per-execute argument lists). It holds no state between calls: every call
// refills what it reads. Per entry, the blocked copies of x/dx share one buffer and those of
// y/dy another (about 2 activation-sized buffers per conv shape); backward reorders dy once for
// both of its primitives. Entries are never evicted (a network has a handful of conv shapes). A
// global mutex guards the map and a per-entry mutex the entry's memories, so concurrent calls
// are safe (and serialized per problem).
#include "fused_ops/conv2d.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "backend/cpu/dnnl_context.h"
#include "core/parallel.h"

namespace hfta::cpu {

namespace {

using dnnl::memory;
using Dims = memory::dims;

memory::desc any_desc(const Dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// How the B models map onto oneDNN calls: `runs` executions of one primitive over plain user
// buffers described by the descs below, advancing each pointer by its step (in floats) per run.
struct Geometry {
  int64_t runs = 1;
  bool dx_sums_runs = false;  // runs share x (a shared input): dx adds up over runs
  memory::desc x, w, bias, y;
  int64_t x_step = 0, w_step = 0, bias_step = 0, y_step = 0;
  Dims strides, dilates, pad_l, pad_r;
};

// [N, C, H, W] channels of a plain [N, C_total, H, W] tensor (a model's slice when C < C_total).
memory::desc channel_slice_desc(int64_t N, int64_t C, int64_t C_total, int64_t H, int64_t W) {
  return memory::desc({N, C, H, W}, memory::data_type::f32, Dims{C_total * H * W, H * W, W, 1});
}

// per_model: B runs of the single-model convolution on each model's slices; otherwise one
// convolution for all B (grouped with B*groups groups, or ungrouped over a shared input).
Geometry make_geometry(const Conv2dParams& p, bool per_model) {
  Geometry g;
  const int64_t oh = p.out_h(), ow = p.out_w(), cin_g = p.in_channels / p.groups;
  const int64_t models = per_model ? 1 : p.B;  // models inside one execution
  const int64_t conv_groups = per_model ? p.groups : p.shared_input ? 1 : p.B * p.groups;
  const int64_t x_total = p.shared_input ? p.in_channels : p.B * p.in_channels;
  g.runs = per_model ? p.B : 1;
  g.dx_sums_runs = per_model && p.shared_input && p.B > 1;
  g.x = channel_slice_desc(p.N, p.shared_input ? p.in_channels : models * p.in_channels, x_total,
                           p.H, p.W);
  if (conv_groups == 1)
    g.w = plain_desc({models * p.out_channels, p.in_channels, p.kernel_h, p.kernel_w});
  else
    g.w = plain_desc(
        {conv_groups, models * p.out_channels / conv_groups, cin_g, p.kernel_h, p.kernel_w});
  g.bias = plain_desc({models * p.out_channels});
  g.y = channel_slice_desc(p.N, models * p.out_channels, p.B * p.out_channels, oh, ow);
  if (per_model) {
    g.x_step = p.shared_input ? 0 : p.in_channels * p.H * p.W;
    g.w_step = p.weight_shape().numel_from(1);
    g.bias_step = p.out_channels;
    g.y_step = p.out_channels * oh * ow;
  }
  g.strides = {p.stride_h, p.stride_w};
  g.dilates = {p.dilation_h - 1, p.dilation_w - 1};  // oneDNN counts the gaps: 0 is dense
  g.pad_l = {p.pad_h, p.pad_w};
  g.pad_r = {p.pad_h, p.pad_w};  // PyTorch pads symmetrically; floor division drops the excess
  return g;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Conv2dParams& p, const Geometry& g) {
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training,
                                    dnnl::algorithm::convolution_direct, any_desc(g.x.dims()),
                                    any_desc(g.w.dims()), p.bias ? g.bias : memory::desc(),
                                    any_desc(g.y.dims()), g.strides, g.dilates, g.pad_l, g.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, user_scratchpad_attr(), dnnl_engine());
}

// oneDNN's generic fallbacks (im2col + gemm, reference loops) as opposed to its JIT kernels.
bool is_fallback(const dnnl::primitive_desc_base& pd) {
  const std::string impl = pd.impl_info_str();
  return impl.find("gemm") != std::string::npos || impl.find("ref") != std::string::npos;
}

// One primitive argument backed by a caller's buffer: `user` wraps the buffer (handle set per
// call), `inner` is what the primitive reads or writes (the same memory when the layouts agree).
struct Edge {
  memory user, inner;
  dnnl::reorder to_inner;  // input edges: user -> inner
  dnnl::reorder write;     // output edges: inner -> user (=)
  dnnl::reorder add;       // output edges: user += inner
  bool separate = false;

  void set(float* data) const { user.set_data_handle(data); }
};

// One buffer for the blocked copies of x-like (or y-like) tensors of an entry: its parts run one
// at a time under the entry's mutex and refill the buffer before each use, so they share it
// (an x-like and a y-like copy are never the same buffer: one primitive may read one and write
// the other). A copy in another layout gets its own buffer.
memory pooled(memory& pool, const memory::desc& want) {
  if (!pool) pool = memory(want, dnnl_engine());
  return pool.get_desc() == want ? pool : memory(want, dnnl_engine());
}

// `pool`: where to take the blocked copy from (see pooled); null for a buffer of its own.
Edge input_edge(const memory::desc& user_md, const memory::desc& want, memory* pool = nullptr) {
  Edge e;
  e.user = memory(user_md, dnnl_engine(), DNNL_MEMORY_NONE);
  e.separate = !(user_md == want);
  if (!e.separate) {
    e.inner = e.user;
    return e;
  }
  e.inner = pool ? pooled(*pool, want) : memory(want, dnnl_engine());
  e.to_inner = dnnl::reorder(e.user, e.inner);
  return e;
}

// can_write: the result may be written (=) to the user buffer; can_add: it may be added (+=),
// which needs a separate scratch `inner` even when the layouts agree.
Edge output_edge(const memory::desc& user_md, const memory::desc& got, bool can_write, bool can_add,
                 memory* pool = nullptr) {
  Edge e;
  e.user = memory(user_md, dnnl_engine(), DNNL_MEMORY_NONE);
  e.separate = can_add || !(user_md == got);
  e.inner = !e.separate ? e.user : pool ? pooled(*pool, got) : memory(got, dnnl_engine());
  if (e.separate && can_write) e.write = dnnl::reorder(e.inner, e.user);
  if (can_add) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(sum);
    e.add = dnnl::reorder(
        dnnl::reorder::primitive_desc(dnnl_engine(), got, dnnl_engine(), user_md, attr));
  }
  return e;
}

void reorder(const dnnl::reorder& r, const memory& from, const memory& to) {
  r.execute(dnnl_stream(), const_cast<memory&>(from), const_cast<memory&>(to));
}

// Runs an input edge's reorder, skipping repeats of a buffer shared by every run.
void bring_in(const Edge& e, int64_t run, int64_t step) {
  if (e.separate && (run == 0 || step != 0)) reorder(e.to_inner, e.user, e.inner);
}

// Each part keeps its execute() arguments: the memory objects never change, only the data
// handles of the user-side ones, so a call builds nothing.
using Args = std::unordered_map<int, memory>;

struct Forward {
  dnnl::convolution_forward prim;
  Edge x, w, y;
  memory bias;
  Args args;
};

struct BackwardData {
  dnnl::convolution_backward_data prim;
  Edge dy, w, dx;
  Args args;
};

struct BackwardWeights {
  dnnl::convolution_backward_weights prim;
  Edge x, dy, dw, db;
  Args args;
};

// Everything cached for one Conv2dParams. The parts are built on first use.
struct Entry {
  std::mutex mutex;
  Conv2dParams p;
  bool per_model = false;
  Geometry g;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  std::unique_ptr<Forward> fwd;
  std::unique_ptr<BackwardData> bwd_data;
  std::unique_ptr<BackwardWeights> bwd_weights;
  memory x_pool, y_pool;  // blocked copies of x / dx and of y / dy, shared by the parts
};

Conv2dStrategy initial_strategy() {
  const char* env = std::getenv("HFTA_CONV_STRATEGY");
  if (env && std::string(env) == "grouped") return Conv2dStrategy::kGrouped;
  if (env && std::string(env) == "per_model") return Conv2dStrategy::kPerModel;
  return Conv2dStrategy::kAuto;
}

std::mutex g_cache_mutex;
Conv2dStrategy g_strategy = initial_strategy();  // guarded by g_cache_mutex
// Keyed by the problem and the strategy asked for, so a strategy change builds new entries.
std::map<std::pair<Conv2dParams, Conv2dStrategy>, std::unique_ptr<Entry>> g_cache;

// Grouped unless that is impossible (a shared input with groups > 1), asked against, or, under
// kAuto, oneDNN has only a fallback kernel for the grouped problem (e.g. channels per group not a
// multiple of its SIMD block: 6 -> 16 channels, B=8 ran 1.8-2.4x slower than 8 single-model
// convolutions) while it has a JIT kernel for the single model.
void choose_strategy(Entry& e, Conv2dStrategy asked) {
  const Conv2dParams& p = e.p;
  e.per_model = p.shared_input && p.groups > 1;
  if (!e.per_model && asked == Conv2dStrategy::kPerModel) e.per_model = p.B > 1;
  e.g = make_geometry(p, e.per_model);
  e.fwd_pd = forward_pd(p, e.g);
  if (e.per_model || asked != Conv2dStrategy::kAuto || p.B == 1 || !is_fallback(e.fwd_pd)) return;
  Geometry single = make_geometry(p, /*per_model=*/true);
  auto single_pd = forward_pd(p, single);
  if (is_fallback(single_pd)) return;
  e.per_model = true;
  e.g = single;
  e.fwd_pd = single_pd;
}

Entry& cached_entry(const Conv2dParams& p) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  std::unique_ptr<Entry>& slot = g_cache[{p, g_strategy}];
  if (!slot) {
    auto e = std::make_unique<Entry>();
    e->p = p;
    choose_strategy(*e, g_strategy);
    slot = std::move(e);
  }
  return *slot;
}

Forward& forward_part(Entry& e) {
  if (!e.fwd) {
    auto f = std::make_unique<Forward>();
    const auto& pd = e.fwd_pd;
    f->prim = dnnl::convolution_forward(pd);
    f->x = input_edge(e.g.x, pd.src_desc(), &e.x_pool);
    f->w = input_edge(e.g.w, pd.weights_desc());
    f->y = output_edge(e.g.y, pd.dst_desc(), /*can_write=*/true, /*can_add=*/false, &e.y_pool);
    f->args = {{DNNL_ARG_SRC, f->x.inner},
               {DNNL_ARG_WEIGHTS, f->w.inner},
               {DNNL_ARG_DST, f->y.inner},
               {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), dnnl_engine())}};
    if (e.p.bias) {
      f->bias = memory(e.g.bias, dnnl_engine(), DNNL_MEMORY_NONE);
      f->args.emplace(DNNL_ARG_BIAS, f->bias);
    }
    e.fwd = std::move(f);
  }
  return *e.fwd;
}

BackwardData& backward_data_part(Entry& e) {
  if (!e.bwd_data) {
    auto f = std::make_unique<BackwardData>();
    const Geometry& g = e.g;
    dnnl::convolution_backward_data::desc d(
        dnnl::algorithm::convolution_direct, any_desc(g.x.dims()), any_desc(g.w.dims()),
        any_desc(g.y.dims()), g.strides, g.dilates, g.pad_l, g.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(d, user_scratchpad_attr(), dnnl_engine(),
                                                       e.fwd_pd);
    f->prim = dnnl::convolution_backward_data(pd);
    f->dy = input_edge(g.y, pd.diff_dst_desc(), &e.y_pool);
    f->w = input_edge(g.w, pd.weights_desc());
    f->dx = output_edge(g.x, pd.diff_src_desc(), /*can_write=*/true,
                        /*can_add=*/g.dx_sums_runs, &e.x_pool);
    f->args = {{DNNL_ARG_DIFF_DST, f->dy.inner},
               {DNNL_ARG_WEIGHTS, f->w.inner},
               {DNNL_ARG_DIFF_SRC, f->dx.inner},
               {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), dnnl_engine())}};
    e.bwd_data = std::move(f);
  }
  return *e.bwd_data;
}

BackwardWeights& backward_weights_part(Entry& e) {
  if (!e.bwd_weights) {
    auto f = std::make_unique<BackwardWeights>();
    const Geometry& g = e.g;
    dnnl::convolution_backward_weights::desc d(
        dnnl::algorithm::convolution_direct, any_desc(g.x.dims()), any_desc(g.w.dims()),
        e.p.bias ? g.bias : memory::desc(), any_desc(g.y.dims()), g.strides, g.dilates, g.pad_l,
        g.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(d, user_scratchpad_attr(), dnnl_engine(),
                                                          e.fwd_pd);
    f->prim = dnnl::convolution_backward_weights(pd);
    f->x = input_edge(g.x, pd.src_desc(), &e.x_pool);
    f->dy = input_edge(g.y, pd.diff_dst_desc(), &e.y_pool);
    f->dw = output_edge(g.w, pd.diff_weights_desc(), /*can_write=*/false, /*can_add=*/true);
    f->args = {{DNNL_ARG_SRC, f->x.inner},
               {DNNL_ARG_DIFF_DST, f->dy.inner},
               {DNNL_ARG_DIFF_WEIGHTS, f->dw.inner},
               {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), dnnl_engine())}};
    if (e.p.bias) {  // computed even when the caller skips dbias, then left in scratch
      f->db = output_edge(g.bias, pd.diff_bias_desc(), /*can_write=*/false, /*can_add=*/true);
      f->args.emplace(DNNL_ARG_DIFF_BIAS, f->db.inner);
    }
    e.bwd_weights = std::move(f);
  }
  return *e.bwd_weights;
}

// dbias += sum of dy over minibatch and pixels, for when no weight gradient is wanted (the
// oneDNN backward-weights primitive would compute both).
void accumulate_bias_gradient(const Conv2dParams& p, const TensorView& dy,
                              const TensorView& dbias) {
  const int64_t channels = p.B * p.out_channels, pixels = p.out_h() * p.out_w();
  parallel_for(channels, [&](int64_t c) {
    double acc = 0.0;
    for (int64_t n = 0; n < p.N; ++n) {
      const float* row = dy.data + (n * channels + c) * pixels;
      for (int64_t i = 0; i < pixels; ++i) acc += row[i];
    }
    dbias.data[c] += static_cast<float>(acc);
  });
}

}  // namespace

void conv2d_forward(const Conv2dParams& p, const TensorView& x, const TensorView& weight,
                    const TensorView& bias, const TensorView& y) {
  Entry& e = cached_entry(p);
  std::lock_guard<std::mutex> lock(e.mutex);
  Forward& f = forward_part(e);
  const Geometry& g = e.g;
  for (int64_t r = 0; r < g.runs; ++r) {
    f.x.set(x.data + r * g.x_step);
    f.w.set(weight.data + r * g.w_step);
    f.y.set(y.data + r * g.y_step);
    bring_in(f.x, r, g.x_step);
    bring_in(f.w, r, g.w_step);
    if (p.bias) f.bias.set_data_handle(bias.data + r * g.bias_step);
    f.prim.execute(dnnl_stream(), f.args);
    if (f.y.separate) reorder(f.y.write, f.y.inner, f.y.user);
  }
  dnnl_stream().wait();
}

void conv2d_backward(const Conv2dParams& p, const TensorView& x, const TensorView& weight,
                     const TensorView& dy, const TensorView& dx, const TensorView& dweight,
                     const TensorView& dbias) {
  Entry& e = cached_entry(p);
  std::lock_guard<std::mutex> lock(e.mutex);
  const Geometry& g = e.g;
  const memory* dy_copy = nullptr;  // dy's blocked copy made by backward-data, if still valid
  if (!dx.empty()) {
    BackwardData& f = backward_data_part(e);
    if (g.runs == 1 && f.dy.separate) dy_copy = &f.dy.inner;
    for (int64_t r = 0; r < g.runs; ++r) {
      f.dy.set(dy.data + r * g.y_step);
      f.w.set(weight.data + r * g.w_step);
      f.dx.set(dx.data + r * g.x_step);
      bring_in(f.dy, r, g.y_step);
      bring_in(f.w, r, g.w_step);
      f.prim.execute(dnnl_stream(), f.args);
      if (f.dx.separate)
        reorder(r > 0 && g.dx_sums_runs ? f.dx.add : f.dx.write, f.dx.inner, f.dx.user);
    }
  }
  const bool want_db = p.bias && !dbias.empty();
  if (!dweight.empty()) {
    BackwardWeights& f = backward_weights_part(e);
    for (int64_t r = 0; r < g.runs; ++r) {
      f.x.set(x.data + r * g.x_step);
      f.dy.set(dy.data + r * g.y_step);
      f.dw.set(dweight.data + r * g.w_step);
      bring_in(f.x, r, g.x_step);
      // Both primitives usually want dy in one layout, in the one pooled buffer: reorder once.
      const bool dy_ready = dy_copy != nullptr && f.dy.separate &&
                            dy_copy->get_data_handle() == f.dy.inner.get_data_handle();
      if (!dy_ready) bring_in(f.dy, r, g.y_step);
      f.prim.execute(dnnl_stream(), f.args);
      reorder(f.dw.add, f.dw.inner, f.dw.user);
      if (want_db) {
        f.db.set(dbias.data + r * g.bias_step);
        reorder(f.db.add, f.db.inner, f.db.user);
      }
    }
  } else if (want_db) {
    accumulate_bias_gradient(p, dy, dbias);
  }
  dnnl_stream().wait();
}

int64_t conv2d_cached_problems() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return static_cast<int64_t>(g_cache.size());
}

void set_conv2d_strategy(Conv2dStrategy strategy) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_strategy = strategy;
}

Conv2dStrategy conv2d_strategy() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return g_strategy;
}

Conv2dStrategy conv2d_strategy_for(const Conv2dParams& p) {
  check_conv2d_params(p);
  return cached_entry(p).per_model ? Conv2dStrategy::kPerModel : Conv2dStrategy::kGrouped;
}

}  // namespace hfta::cpu
