// CPU fused conv_transpose2d on oneDNN deconvolution primitives (direct algorithm, f32).
//
// How the B models map onto oneDNN (ConvTranspose2dStrategy, chosen per problem):
// - grouped (the default for a per-model input): ONE deconvolution with B groups. The
//   [N, B*C, H, W] layout makes model b group b, and the [B, C_in, C_out, kH, kW] weights are
//   exactly oneDNN's grouped deconvolution weights in format `giohw` (logical dims
//   [G, C_out, C_in, kH, kW], stored with C_in outside C_out, as PyTorch stores them). So we
//   describe our buffer with that tag and the weight reorder oneDNN needs anyway (into its
//   blocked layout) does the transpose: no transpose pass of ours, no copy when a layout agrees.
// - per model: B runs of the single-model deconvolution (weights `iohw`) on each model's channel
//   slices, one after another with every thread inside oneDNN. Always for a shared input (one
//   grouped primitive cannot read one x for every group); its dx sums over the runs: the first
//   run writes, later ones add. Also when oneDNN has only its reference kernel for the grouped
//   problem but a real one for the single model, and on request (for comparison).
// oneDNN implements deconvolution through its convolution kernels (forward = convolution
// backward-data and vice versa), so the JIT kernels want channels per group in multiples of 8 or
// 16 (DCGAN's 512/256/128/64); others (nz = 100, 3 colour channels) mostly go to gemm kernels.
//
// The cache follows conv2d's design (fused_ops/cpu/conv2d_onednn.cpp), without its per-thread
// lanes: the primitives are created with format_tag::any on the first call for a
// ConvTranspose2dParams, with their blocked copies, scratch and user-mode scratchpads, and every
// later call with the same params reuses them, so a training step allocates no buffers. Our
// plain buffers are converted at the edges of each call (fused_ops/cpu/dnnl_edges.h: our own
// transposes for channel-blocked activations, oneDNN reorders for the rest); parameter gradients
// (and accumulated or summed input gradients) go through scratch and a reorder with a sum
// post-op, so they add (+=) into the caller's buffer. The blocked copies of x and dx share one
// buffer, those of y and dy another (each use refills its copy). At most 32 problems are kept,
// least recently used evicted; a global mutex guards the map, a per-entry mutex its memories.
// In deterministic mode (core/determinism.h) every problem runs per model (B = 1 included) on
// primitives planned for one thread, since oneDNN's kernels sum in another order on other thread
// counts and for grouped problems; the op then runs on one thread (DCGAN's generator only).
#include "fused_ops/conv_transpose2d.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "backend/cpu/dnnl_context.h"
#include "core/determinism.h"
#include "core/parallel.h"
#include "fused_ops/cpu/dnnl_edges.h"
#include "fused_ops/cpu/primitive_cache.h"

namespace hfta::cpu {

namespace {

using dnnl::memory;
using Dims = memory::dims;
using Args = std::unordered_map<int, memory>;

memory::desc any_desc(const Dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// [N, C, H, W] channels of a plain [N, C_total, H, W] tensor (a model's slice when C < C_total).
memory::desc channel_slice_desc(int64_t N, int64_t C, int64_t C_total, int64_t H, int64_t W) {
  return memory::desc({N, C, H, W}, memory::data_type::f32, Dims{C_total * H * W, H * W, W, 1});
}

// `runs` executions of one primitive over the caller's buffers described by the descs below,
// each pointer advancing by its step (in floats) per run.
struct Geometry {
  int64_t runs = 1;
  bool dx_sums_runs = false;  // the runs share x (a shared input): dx adds up over them
  memory::desc x, w, bias, y;
  int64_t x_step = 0, w_step = 0, bias_step = 0, y_step = 0;
  Dims strides, pad;
};

Geometry make_geometry(const ConvTranspose2dParams& p, bool per_model) {
  Geometry g;
  const int64_t models = per_model ? 1 : p.B;  // models inside one execution
  const int64_t cin = p.in_channels, cout = p.out_channels, kh = p.kernel_h, kw = p.kernel_w;
  g.runs = per_model ? p.B : 1;
  g.dx_sums_runs = per_model && p.shared_input && p.B > 1;
  g.x = channel_slice_desc(p.N, p.shared_input ? cin : models * cin,
                           p.shared_input ? cin : p.B * cin, p.H, p.W);
  // PyTorch's [C_in, C_out, kH, kW] per model, in oneDNN's logical [(G,) C_out, C_in, kH, kW].
  g.w = models == 1
            ? memory::desc({cout, cin, kh, kw}, memory::data_type::f32, memory::format_tag::iohw)
            : memory::desc({models, cout, cin, kh, kw}, memory::data_type::f32,
                           memory::format_tag::giohw);
  g.bias = plain_desc({models * cout});
  g.y = channel_slice_desc(p.N, models * cout, p.B * cout, p.out_h(), p.out_w());
  if (per_model) {
    g.x_step = p.shared_input ? 0 : cin * p.H * p.W;
    g.w_step = cin * cout * kh * kw;
    g.bias_step = cout;
    g.y_step = cout * p.out_h() * p.out_w();
  }
  g.strides = {p.stride_h, p.stride_w};
  g.pad = {p.pad_h, p.pad_w};  // PyTorch trims the same on both sides
  return g;
}

dnnl::deconvolution_forward::primitive_desc forward_pd(const ConvTranspose2dParams& p,
                                                       const Geometry& g) {
  dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_training,
                                      dnnl::algorithm::deconvolution_direct, any_desc(g.x.dims()),
                                      any_desc(g.w.dims()), p.bias ? g.bias : memory::desc(),
                                      any_desc(g.y.dims()), g.strides, g.pad, g.pad);
  return dnnl::deconvolution_forward::primitive_desc(d, user_scratchpad_attr(), dnnl_engine());
}

// oneDNN's reference loops, as opposed to its JIT and gemm kernels.
bool is_reference(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).find("ref") != std::string::npos;
}

memory scratchpad(const dnnl::primitive_desc_base& pd) {
  return memory(pd.scratchpad_desc(), dnnl_engine());
}

struct Forward {
  dnnl::deconvolution_forward prim;
  Edge x, w, y;
  memory bias;
  Args args;
};

struct BackwardData {
  dnnl::deconvolution_backward_data prim;
  Edge dy, w;
  Edge dx_write, dx_add;  // dx = gradient, dx += gradient
  Args write_args, add_args;
};

struct BackwardWeights {
  dnnl::deconvolution_backward_weights prim;
  Edge x, dy, dw, db;
  Args args;
};

// Everything cached for one problem; the parts are built on first use.
struct Entry {
  std::mutex mutex;
  uint64_t last_used = 0;  // g_tick at the last lookup; guarded by g_cache_mutex
  ConvTranspose2dParams p;
  bool per_model = false;
  Geometry g;
  dnnl::deconvolution_forward::primitive_desc fwd_pd;
  std::unique_ptr<Forward> fwd;
  std::unique_ptr<BackwardData> bwd_data;
  std::unique_ptr<BackwardWeights> bwd_weights;
  memory x_pool, y_pool;  // blocked copies of x / dx and of y / dy
};

ConvTranspose2dStrategy initial_strategy() {
  const char* env = std::getenv("HFTA_CONV_TRANSPOSE_STRATEGY");
  if (env && std::string(env) == "grouped") return ConvTranspose2dStrategy::kGrouped;
  if (env && std::string(env) == "per_model") return ConvTranspose2dStrategy::kPerModel;
  return ConvTranspose2dStrategy::kAuto;
}

constexpr int64_t kCacheCapacity = 32;  // per caller (primitive_cache.h)
std::mutex g_cache_mutex;
ConvTranspose2dStrategy g_strategy = initial_strategy();  // guarded by g_cache_mutex
// Keyed as conv2d's cache (fused_ops/cpu/conv2d_onednn.cpp): by the problem, the strategy, the
// thread count the primitives are planned for and the OpenMP thread calling from inside a parallel
// region, so plans that run models per thread neither share an entry nor wait on one.
struct CacheKey {
  ConvTranspose2dParams p;
  ConvTranspose2dStrategy strategy;
  bool deterministic;
  int threads;
  int caller;
  auto operator<=>(const CacheKey&) const = default;
};
std::map<CacheKey, std::shared_ptr<Entry>> g_cache;  // guarded by g_cache_mutex
uint64_t g_tick = 0;                                 // guarded by g_cache_mutex

// kAuto: grouped, unless only oneDNN's reference kernel takes the grouped problem and a faster
// one takes the single model. A shared input is per model under every strategy.
void choose_strategy(Entry& e, ConvTranspose2dStrategy asked) {
  const ConvTranspose2dParams& p = e.p;
  e.per_model = p.B > 1 && (p.shared_input || asked == ConvTranspose2dStrategy::kPerModel);
  e.g = make_geometry(p, e.per_model);
  e.fwd_pd = forward_pd(p, e.g);
  if (e.per_model || p.B == 1 || asked != ConvTranspose2dStrategy::kAuto || !is_reference(e.fwd_pd))
    return;
  Geometry single = make_geometry(p, /*per_model=*/true);
  auto single_pd = forward_pd(p, single);
  if (is_reference(single_pd)) return;
  e.per_model = true;
  e.g = single;
  e.fwd_pd = single_pd;
}

std::shared_ptr<Entry> cached_entry(const ConvTranspose2dParams& p) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  const CacheKey key{p, g_strategy, deterministic(), num_threads(),
                     omp_in_parallel() ? omp_get_thread_num() : -1};
  auto it = g_cache.find(key);
  if (it == g_cache.end()) {
    auto e = std::make_shared<Entry>();
    e->p = p;
    choose_strategy(*e, key.deterministic ? ConvTranspose2dStrategy::kPerModel : g_strategy);
    evict_least_recent(g_cache, key.caller, kCacheCapacity - 1);
    it = g_cache.emplace(key, std::move(e)).first;
  }
  it->second->last_used = ++g_tick;
  return it->second;
}

Forward& forward_part(Entry& e) {
  if (!e.fwd) {
    auto f = std::make_unique<Forward>();
    const auto& pd = e.fwd_pd;
    f->prim = dnnl::deconvolution_forward(pd);
    f->x = input_edge(e.g.x, pd.src_desc(), &e.x_pool);
    f->w = input_edge(e.g.w, pd.weights_desc());
    f->y = output_edge(e.g.y, pd.dst_desc(), /*can_write=*/true, /*can_add=*/false, &e.y_pool);
    f->args = {{DNNL_ARG_SRC, f->x.inner},
               {DNNL_ARG_WEIGHTS, f->w.inner},
               {DNNL_ARG_DST, f->y.inner},
               {DNNL_ARG_SCRATCHPAD, scratchpad(pd)}};
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
    dnnl::deconvolution_backward_data::desc d(dnnl::algorithm::deconvolution_direct,
                                              any_desc(g.x.dims()), any_desc(g.w.dims()),
                                              any_desc(g.y.dims()), g.strides, g.pad, g.pad);
    dnnl::deconvolution_backward_data::primitive_desc pd(d, user_scratchpad_attr(), dnnl_engine(),
                                                         e.fwd_pd);
    f->prim = dnnl::deconvolution_backward_data(pd);
    f->dy = input_edge(g.y, pd.diff_dst_desc(), &e.y_pool);
    f->w = input_edge(g.w, pd.weights_desc());
    f->dx_write =
        output_edge(g.x, pd.diff_src_desc(), /*can_write=*/true, /*can_add=*/false, &e.x_pool);
    f->dx_add =
        output_edge(g.x, pd.diff_src_desc(), /*can_write=*/false, /*can_add=*/true, &e.x_pool);
    const memory pad = scratchpad(pd);
    f->write_args = {{DNNL_ARG_DIFF_DST, f->dy.inner},
                     {DNNL_ARG_WEIGHTS, f->w.inner},
                     {DNNL_ARG_DIFF_SRC, f->dx_write.inner},
                     {DNNL_ARG_SCRATCHPAD, pad}};
    f->add_args = f->write_args;
    f->add_args[DNNL_ARG_DIFF_SRC] = f->dx_add.inner;
    e.bwd_data = std::move(f);
  }
  return *e.bwd_data;
}

BackwardWeights& backward_weights_part(Entry& e) {
  if (!e.bwd_weights) {
    auto f = std::make_unique<BackwardWeights>();
    const Geometry& g = e.g;
    dnnl::deconvolution_backward_weights::desc d(
        dnnl::algorithm::deconvolution_direct, any_desc(g.x.dims()), any_desc(g.w.dims()),
        e.p.bias ? g.bias : memory::desc(), any_desc(g.y.dims()), g.strides, g.pad, g.pad);
    dnnl::deconvolution_backward_weights::primitive_desc pd(d, user_scratchpad_attr(),
                                                            dnnl_engine(), e.fwd_pd);
    f->prim = dnnl::deconvolution_backward_weights(pd);
    f->x = input_edge(g.x, pd.src_desc(), &e.x_pool);
    f->dy = input_edge(g.y, pd.diff_dst_desc(), &e.y_pool);
    f->dw = output_edge(g.w, pd.diff_weights_desc(), /*can_write=*/false, /*can_add=*/true);
    f->args = {{DNNL_ARG_SRC, f->x.inner},
               {DNNL_ARG_DIFF_DST, f->dy.inner},
               {DNNL_ARG_DIFF_WEIGHTS, f->dw.inner},
               {DNNL_ARG_SCRATCHPAD, scratchpad(pd)}};
    if (e.p.bias) {  // computed even when the caller skips dbias, then left in scratch
      f->db = output_edge(g.bias, pd.diff_bias_desc(), /*can_write=*/false, /*can_add=*/true);
      f->args.emplace(DNNL_ARG_DIFF_BIAS, f->db.inner);
    }
    e.bwd_weights = std::move(f);
  }
  return *e.bwd_weights;
}

// dbias += the sum of dy over minibatch and pixels, for when no weight gradient is wanted (the
// backward-weights primitive would compute both).
void accumulate_bias_gradient(const ConvTranspose2dParams& p, const TensorView& dy,
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

// Runs op with one OpenMP thread in deterministic mode (see the file's comment), restoring the
// caller's thread count after.
template <typename F>
void one_thread_if_deterministic(F&& op) {
  if (!deterministic() || omp_get_max_threads() == 1) return op();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  try {
    op();
  } catch (...) {
    omp_set_num_threads(threads);
    throw;
  }
  omp_set_num_threads(threads);
}

void forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a) {
  const std::shared_ptr<Entry> entry = cached_entry(p);
  Entry& e = *entry;
  std::lock_guard<std::mutex> lock(e.mutex);
  const Geometry& g = e.g;
  dnnl::stream& stream = dnnl_stream();
  Forward& f = forward_part(e);
  for (int64_t r = 0; r < g.runs; ++r) {
    f.x.set(a.x.data + r * g.x_step);
    f.w.set(a.weight.data + r * g.w_step);
    f.y.set(a.y.data + r * g.y_step);
    if (p.bias) f.bias.set_data_handle(a.bias.data + r * g.bias_step);
    bring_in(stream, f.x);
    bring_in(stream, f.w);
    f.prim.execute(stream, f.args);
    write_out(stream, f.y);
  }
  stream.wait();
}

void backward(const ConvTranspose2dParams& p, const ConvTranspose2dBackwardArgs& a) {
  const std::shared_ptr<Entry> entry = cached_entry(p);
  Entry& e = *entry;
  std::lock_guard<std::mutex> lock(e.mutex);
  const Geometry& g = e.g;
  dnnl::stream& stream = dnnl_stream();
  const bool want_db = p.bias && !a.dbias.empty();
  BackwardData* data = a.dx.empty() ? nullptr : &backward_data_part(e);
  BackwardWeights* weights = a.dweight.empty() ? nullptr : &backward_weights_part(e);
  // Model by model (one run when grouped): both primitives of a run read its dy while in cache.
  for (int64_t r = 0; r < g.runs; ++r) {
    if (data != nullptr) {
      BackwardData& f = *data;
      // Written by the first run unless accumulating; added by every later run that sums into
      // a shared input's dx.
      const bool add = a.accumulate_dx || (r > 0 && g.dx_sums_runs);
      Edge& dx = add ? f.dx_add : f.dx_write;
      f.dy.set(a.dy.data + r * g.y_step);
      f.w.set(a.weight.data + r * g.w_step);
      dx.set(a.dx.data + r * g.x_step);
      bring_in(stream, f.dy);
      bring_in(stream, f.w);
      f.prim.execute(stream, add ? f.add_args : f.write_args);
      store_out(stream, dx, add);
    }
    if (weights != nullptr) {
      BackwardWeights& f = *weights;
      f.x.set(a.x.data + r * g.x_step);
      f.dy.set(a.dy.data + r * g.y_step);
      f.dw.set(a.dweight.data + r * g.w_step);
      bring_in(stream, f.x);  // always: dx's copy may have taken the pooled buffer
      bring_in(stream, f.dy);
      f.prim.execute(stream, f.args);
      add_out(stream, f.dw);
      if (want_db) {
        f.db.set(a.dbias.data + r * g.bias_step);
        add_out(stream, f.db);
      }
    }
  }
  stream.wait();
  if (weights == nullptr && want_db) accumulate_bias_gradient(p, a.dy, a.dbias);
}

}  // namespace

void conv_transpose2d_forward(const ConvTranspose2dParams& p, const ConvTranspose2dForwardArgs& a) {
  one_thread_if_deterministic([&] { forward(p, a); });
}

void conv_transpose2d_backward(const ConvTranspose2dParams& p,
                               const ConvTranspose2dBackwardArgs& a) {
  one_thread_if_deterministic([&] { backward(p, a); });
}

void set_conv_transpose2d_strategy(ConvTranspose2dStrategy strategy) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_strategy = strategy;
}

ConvTranspose2dStrategy conv_transpose2d_strategy() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return g_strategy;
}

ConvTranspose2dStrategy conv_transpose2d_strategy_for(const ConvTranspose2dParams& p) {
  check_conv_transpose2d_params(p);
  return cached_entry(p)->per_model ? ConvTranspose2dStrategy::kPerModel
                                    : ConvTranspose2dStrategy::kGrouped;
}

int64_t conv_transpose2d_cached_problems() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return static_cast<int64_t>(g_cache.size());
}

void clear_conv_transpose2d_cache() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cache.clear();  // an entry in use lives on in its caller's shared_ptr until the call returns
}

}  // namespace hfta::cpu
