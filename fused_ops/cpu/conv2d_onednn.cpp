// conv2d on oneDNN convolution primitives: the grouped and per-model strategies of
// fused_ops/cpu/conv2d.cpp (which says how the B models map onto them), and their cache.
//
// Layouts: every primitive is created with format_tag::any and picks its fast (blocked) layout;
// our plain NCHW / [B, ...] buffers are converted in and out at the edges of each call: the
// activations by our own transposes (fused_ops/cpu/dnnl_edges.h), weights and gradients by oneDNN
// reorders. Parameter gradients accumulate: oneDNN writes diff_weights / diff_bias into scratch
// memory, and a reorder with a sum post-op adds it to the caller's buffer.
//
// The op's one cache, by design: the primitives, their internal memories (blocked copies,
// gradient scratch, user-mode scratchpads) are created on the first call for a Conv2dParams and
// reused by every later call with the same params, so a training step allocates no buffers (only
// oneDNN's small per-execute argument lists). It holds no state between calls: every call
// refills what it reads. Per lane, the blocked copies of x/dx share one buffer and those of
// y/dy another (about 2 activation-sized buffers per conv shape, per model-sized for a
// per-model lane); backward converts each run's dy once for both of its primitives, running
// backward-data and backward-weights model by model. The cache holds at most
// conv2d_cache_capacity() problems per calling thread (32 by default: a network has a handful of
// conv shapes, but every distinct last-batch size N is a problem of its own; per thread, see
// primitive_cache.h) and evicts the least recently used one. A global mutex guards the map and a
// per-entry mutex the entry's memories, so concurrent calls are safe (and serialized per problem);
// callers hold an entry by shared_ptr, so one evicted while in use lives until its call returns.
#include "fused_ops/cpu/conv2d_onednn.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/runtime.h"
#include "core/determinism.h"
#include "core/error.h"
#include "core/parallel.h"
#include "fused_ops/cpu/dnnl_edges.h"
#include "fused_ops/cpu/primitive_cache.h"

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
  // For accumulate_dx, built on first use: an edge that adds dx into the caller's buffer (its
  // scratch is dx's blocked copy when that is separate), and args writing to it.
  std::unique_ptr<Edge> dx_add;
  Args add_args;
};

struct BackwardWeights {
  dnnl::convolution_backward_weights prim;
  Edge x, dy, dw, db;
  Args args;
};

// One set of primitives with the memories they run on, used by one thread at a time. The parts
// are built on first use.
struct Lane {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  std::unique_ptr<Forward> fwd;
  std::unique_ptr<BackwardData> bwd_data;
  std::unique_ptr<BackwardWeights> bwd_weights;
  memory x_pool, y_pool;  // blocked copies of x / dx and of y / dy, shared by the parts
  dnnl::stream stream;
};

// Everything cached for one Conv2dParams: the lane that runs every run with all threads inside
// oneDNN, and, for per-model problems run across models, one single-threaded lane per thread.
struct Entry {
  std::mutex mutex;
  uint64_t last_used = 0;  // g_tick at the last lookup; guarded by g_cache_mutex
  Conv2dParams p;
  bool per_model = false;
  Geometry g;
  Lane inside;
  std::vector<std::unique_ptr<Lane>> thread_lanes;
};

// Runs before main: a name it does not know is reported and left as auto (an exception here
// would abort every program linked with hfta).
Conv2dStrategy initial_strategy() {
  const char* env = std::getenv("HFTA_CONV_STRATEGY");
  if (env == nullptr) return Conv2dStrategy::kAuto;
  try {
    return parse_conv2d_strategy(env);
  } catch (const Error& e) {
    fmt::print(stderr, "HFTA_CONV_STRATEGY: {}; using auto\n", e.what());
    return Conv2dStrategy::kAuto;
  }
}

std::mutex g_cache_mutex;
Conv2dStrategy g_strategy = initial_strategy();  // guarded by g_cache_mutex
// Keyed by the problem, the strategy asked for (a strategy change builds new entries),
// deterministic mode, the thread count the primitives are planned for, and the OpenMP thread
// calling from inside a parallel region (-1 outside one): plans that run whole models per thread
// (models/plan.h) call the same problem from several threads at once, each with one thread, and
// must neither wait on one entry's mutex nor run a primitive planned for another thread count.
struct CacheKey {
  Conv2dParams p;
  Conv2dStrategy strategy;
  bool deterministic;
  int threads;
  int caller;
  auto operator<=>(const CacheKey&) const = default;
};
std::map<CacheKey, std::shared_ptr<Entry>> g_cache;
int64_t g_capacity = 32;  // per caller (primitive_cache.h); guarded by g_cache_mutex
uint64_t g_tick = 0;      // guarded by g_cache_mutex

// kGrouped: grouped, unless that is impossible (a shared input with groups > 1). kPerModel: per
// model for B > 1. kAuto: per model for B > 1 (run across the threads when B is a multiple of
// their count, see runs_across_models), unless oneDNN has a JIT kernel only for the grouped
// problem. Per model measured faster than grouped at B=8 on every shape tried but the smallest,
// where they tie (docs/benchmarks.md, 'Measurements behind code choices'). The grouped kernels
// loop over all B models' channels per image, so their working set (weights, partial weight
// gradients, activations) is B times a model's; per model it is one model's.
void choose_strategy(Entry& e, Conv2dStrategy asked) {
  if (asked != Conv2dStrategy::kGrouped && asked != Conv2dStrategy::kPerModel)
    asked = Conv2dStrategy::kAuto;  // our kernels' strategies, on oneDNN: as auto
  const Conv2dParams& p = e.p;
  const bool must_split = p.shared_input && p.groups > 1;  // cannot be one primitive
  e.per_model = must_split || (asked != Conv2dStrategy::kGrouped && p.B > 1);
  e.g = make_geometry(p, e.per_model);
  e.inside.fwd_pd = forward_pd(p, e.g);
  e.inside.stream = dnnl_stream();
  if (!e.per_model || must_split || asked != Conv2dStrategy::kAuto || !is_fallback(e.inside.fwd_pd))
    return;
  Geometry grouped = make_geometry(p, /*per_model=*/false);
  auto grouped_pd = forward_pd(p, grouped);
  if (is_fallback(grouped_pd)) return;
  e.per_model = false;
  e.g = grouped;
  e.inside.fwd_pd = grouped_pd;
}

std::shared_ptr<Entry> cached_entry(const Conv2dParams& p) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  const CacheKey key{p, g_strategy, deterministic(), num_threads(),
                     omp_in_parallel() ? omp_get_thread_num() : -1};
  auto it = g_cache.find(key);
  if (it == g_cache.end()) {
    auto e = std::make_shared<Entry>();
    e->p = p;
    choose_strategy(*e, key.deterministic ? Conv2dStrategy::kPerModel : g_strategy);
    evict_least_recent(g_cache, key.caller, g_capacity - 1);
    it = g_cache.emplace(key, std::move(e)).first;
  }
  it->second->last_used = ++g_tick;
  return it->second;
}

Forward& forward_part(const Entry& e, Lane& lane) {
  if (!lane.fwd) {
    auto f = std::make_unique<Forward>();
    const auto& pd = lane.fwd_pd;
    f->prim = dnnl::convolution_forward(pd);
    f->x = input_edge(e.g.x, pd.src_desc(), &lane.x_pool);
    f->w = input_edge(e.g.w, pd.weights_desc());
    f->y = output_edge(e.g.y, pd.dst_desc(), /*can_write=*/true, /*can_add=*/false, &lane.y_pool);
    f->args = {{DNNL_ARG_SRC, f->x.inner},
               {DNNL_ARG_WEIGHTS, f->w.inner},
               {DNNL_ARG_DST, f->y.inner},
               {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), dnnl_engine())}};
    if (e.p.bias) {
      f->bias = memory(e.g.bias, dnnl_engine(), DNNL_MEMORY_NONE);
      f->args.emplace(DNNL_ARG_BIAS, f->bias);
    }
    lane.fwd = std::move(f);
  }
  return *lane.fwd;
}

BackwardData& backward_data_part(const Entry& e, Lane& lane) {
  if (!lane.bwd_data) {
    auto f = std::make_unique<BackwardData>();
    const Geometry& g = e.g;
    dnnl::convolution_backward_data::desc d(
        dnnl::algorithm::convolution_direct, any_desc(g.x.dims()), any_desc(g.w.dims()),
        any_desc(g.y.dims()), g.strides, g.dilates, g.pad_l, g.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(d, user_scratchpad_attr(), dnnl_engine(),
                                                       lane.fwd_pd);
    f->prim = dnnl::convolution_backward_data(pd);
    f->dy = input_edge(g.y, pd.diff_dst_desc(), &lane.y_pool);
    f->w = input_edge(g.w, pd.weights_desc());
    f->dx = output_edge(g.x, pd.diff_src_desc(), /*can_write=*/true,
                        /*can_add=*/g.dx_sums_runs, &lane.x_pool);
    f->args = {{DNNL_ARG_DIFF_DST, f->dy.inner},
               {DNNL_ARG_WEIGHTS, f->w.inner},
               {DNNL_ARG_DIFF_SRC, f->dx.inner},
               {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), dnnl_engine())}};
    lane.bwd_data = std::move(f);
  }
  return *lane.bwd_data;
}

// backward-data's dx edge for accumulate_dx (see BackwardData::dx_add), with its arguments.
std::pair<Edge&, const Args&> accumulating_dx(const Entry& e, Lane& lane, BackwardData& f) {
  if (!f.dx_add) {
    f.dx_add = std::make_unique<Edge>(output_edge(e.g.x, f.dx.inner.get_desc(), /*can_write=*/true,
                                                  /*can_add=*/true, &lane.x_pool));
    f.add_args = f.args;
    f.add_args[DNNL_ARG_DIFF_SRC] = f.dx_add->inner;
  }
  return {*f.dx_add, f.add_args};
}

BackwardWeights& backward_weights_part(const Entry& e, Lane& lane) {
  if (!lane.bwd_weights) {
    auto f = std::make_unique<BackwardWeights>();
    const Geometry& g = e.g;
    dnnl::convolution_backward_weights::desc d(
        dnnl::algorithm::convolution_direct, any_desc(g.x.dims()), any_desc(g.w.dims()),
        e.p.bias ? g.bias : memory::desc(), any_desc(g.y.dims()), g.strides, g.dilates, g.pad_l,
        g.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(d, user_scratchpad_attr(), dnnl_engine(),
                                                          lane.fwd_pd);
    f->prim = dnnl::convolution_backward_weights(pd);
    f->x = input_edge(g.x, pd.src_desc(), &lane.x_pool);
    f->dy = input_edge(g.y, pd.diff_dst_desc(), &lane.y_pool);
    f->dw = output_edge(g.w, pd.diff_weights_desc(), /*can_write=*/true, /*can_add=*/true);
    f->args = {{DNNL_ARG_SRC, f->x.inner},
               {DNNL_ARG_DIFF_DST, f->dy.inner},
               {DNNL_ARG_DIFF_WEIGHTS, f->dw.inner},
               {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), dnnl_engine())}};
    if (e.p.bias) {  // computed even when the caller skips dbias, then left in scratch
      f->db = output_edge(g.bias, pd.diff_bias_desc(), /*can_write=*/true, /*can_add=*/true);
      f->args.emplace(DNNL_ARG_DIFF_BIAS, f->db.inner);
    }
    lane.bwd_weights = std::move(f);
  }
  return *lane.bwd_weights;
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

// Whether per-model runs go one model per thread (each thread running its models' primitives
// alone) rather than one run at a time with every thread inside oneDNN. Runs that sum into one
// dx (a shared input's gradient) cannot run side by side (in deterministic mode they run in order
// on one thread's lane). Deterministic mode never runs a primitive on more than one thread.
bool runs_across_models(const Entry& e, bool sums_dx) {
  const int threads = num_threads();
  if (deterministic() && (e.per_model || e.g.runs == 1) && threads > 1) return true;
  if (!e.per_model || sums_dx || threads < 2 || e.p.B < 2) return false;
  switch (model_parallelism()) {
    case ModelParallelism::kAcrossModels:
      return true;
    case ModelParallelism::kInsideOp:
      return false;
    default:
      return e.p.B % threads == 0;
  }
}

// Calls run(lane, r, first) for every run r, first = r is the lane's first run of this call: in
// order on the entry's own lane, or spread over the threads, thread t taking a contiguous block
// of runs on its own lane (all runs on thread 0's lane when they sum into one dx). A thread lane
// is built by the thread that first uses it, with OpenMP's thread count set to 1 for that task,
// so oneDNN plans its kernels for one thread (a primitive planned for more threads and run
// inside our parallel region would do only thread 0's share).
template <typename F>
void for_each_run(Entry& e, bool sums_dx, F&& run) {
  if (!runs_across_models(e, sums_dx)) {
    for (int64_t r = 0; r < e.g.runs; ++r) run(e.inside, r, r == 0);
    return;
  }
  const int threads = sums_dx ? 1 : std::min<int>(num_threads(), static_cast<int>(e.g.runs));
  if (static_cast<int>(e.thread_lanes.size()) < threads) e.thread_lanes.resize(threads);
  std::vector<std::exception_ptr> errors(threads);
  parallel_for(threads, [&](int64_t t) {
    // One thread's share runs on the caller (parallel_for), whose thread count is restored.
    const int caller_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    try {
      std::unique_ptr<Lane>& lane = e.thread_lanes[t];
      if (!lane) {
        lane = std::make_unique<Lane>();
        lane->fwd_pd = forward_pd(e.p, e.g);
        lane->stream = dnnl::stream(dnnl_engine());
      }
      const int64_t begin = t * e.g.runs / threads, end = (t + 1) * e.g.runs / threads;
      for (int64_t r = begin; r < end; ++r) run(*lane, r, r == begin);
      lane->stream.wait();
    } catch (...) {
      errors[t] = std::current_exception();
    }
    omp_set_num_threads(caller_threads);
  });
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace

void conv2d_onednn_forward(const Conv2dParams& p, const Conv2dForwardArgs& a) {
  const TensorView &x = a.x, &weight = a.weight, &bias = a.bias, &y = a.y;
  const std::shared_ptr<Entry> entry = cached_entry(p);
  Entry& e = *entry;
  std::lock_guard<std::mutex> lock(e.mutex);
  const Geometry& g = e.g;
  for_each_run(e, /*sums_dx=*/false, [&](Lane& lane, int64_t r, bool first) {
    Forward& f = forward_part(e, lane);
    f.x.set(x.data + r * g.x_step);
    f.w.set(weight.data + r * g.w_step);
    f.y.set(y.data + r * g.y_step);
    bring_in(lane.stream, f.x, first, g.x_step);
    bring_in(lane.stream, f.w, first, g.w_step);
    if (p.bias) f.bias.set_data_handle(bias.data + r * g.bias_step);
    f.prim.execute(lane.stream, f.args);
    write_out(lane.stream, f.y);
  });
  dnnl_stream().wait();
}

// The backward on oneDNN primitives.
void conv2d_onednn_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a) {
  const TensorView &x = a.x, &weight = a.weight, &dy = a.dy, &dx = a.dx, &dweight = a.dweight,
                   &dbias = a.dbias;
  const std::shared_ptr<Entry> entry = cached_entry(p);
  Entry& e = *entry;
  std::lock_guard<std::mutex> lock(e.mutex);
  const Geometry& g = e.g;
  const bool want_db = p.bias && !dbias.empty();
  for_each_run(e, g.dx_sums_runs && !dx.empty(), [&](Lane& lane, int64_t r, bool first) {
    dnnl::stream& stream = lane.stream;
    BackwardData* data = dx.empty() ? nullptr : &backward_data_part(e, lane);
    BackwardWeights* weights = dweight.empty() ? nullptr : &backward_weights_part(e, lane);
    // Where dx goes: written by the first run (unless accumulating), added by later runs that
    // sum into one dx (a shared input) and by every run when accumulating.
    Edge* dx_edge = nullptr;
    const Args* data_args = nullptr;
    if (data != nullptr) {
      if (a.accumulate_dx) {
        auto [edge, args] = accumulating_dx(e, lane, *data);
        dx_edge = &edge, data_args = &args;
      } else {
        dx_edge = &data->dx, data_args = &data->args;
      }
    }
    // Both primitives usually want dy in one layout, in the one pooled buffer: each run reorders
    // dy once, for backward-data and then backward-weights (so the runs of a per-model problem
    // go model by model, each model's dy copy used twice while it is in cache).
    const bool dy_shared = data != nullptr && weights != nullptr && data->dy.separate &&
                           weights->dy.separate &&
                           data->dy.inner.get_data_handle() == weights->dy.inner.get_data_handle();
    // A shared x has one blocked copy for all runs, but backward-data's dx copy takes its buffer.
    const bool x_clobbered = data != nullptr && weights != nullptr && dx_edge->separate &&
                             weights->x.separate &&
                             dx_edge->inner.get_data_handle() == weights->x.inner.get_data_handle();
    if (data != nullptr) {
      BackwardData& f = *data;
      f.dy.set(dy.data + r * g.y_step);
      f.w.set(weight.data + r * g.w_step);
      dx_edge->set(dx.data + r * g.x_step);
      bring_in(stream, f.dy, first, g.y_step);
      bring_in(stream, f.w, first, g.w_step);
      f.prim.execute(stream, *data_args);
      store_out(stream, *dx_edge, a.accumulate_dx || (r > 0 && g.dx_sums_runs));
    }
    if (weights != nullptr) {
      BackwardWeights& f = *weights;
      f.x.set(x.data + r * g.x_step);
      f.dy.set(dy.data + r * g.y_step);
      f.dw.set(dweight.data + r * g.w_step);
      bring_in(stream, f.x, first, g.x_step, x_clobbered);
      if (!dy_shared) bring_in(stream, f.dy, first, g.y_step);
      f.prim.execute(stream, f.args);
      store_out(stream, f.dw, a.accumulate_dparams);
      if (want_db) {
        f.db.set(dbias.data + r * g.bias_step);
        store_out(stream, f.db, a.accumulate_dparams);
      }
    }
  });
  if (dweight.empty() && want_db) accumulate_bias_gradient(p, dy, dbias);
  dnnl_stream().wait();
}

bool conv2d_onednn_runs_per_model(const Conv2dParams& p) { return cached_entry(p)->per_model; }

int64_t conv2d_cached_problems() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return static_cast<int64_t>(g_cache.size());
}

void clear_conv2d_cache() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cache.clear();  // an entry in use lives on in its caller's shared_ptr until the call returns
}

void set_conv2d_cache_capacity(int64_t problems) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_capacity = std::max<int64_t>(1, problems);
  std::set<int> callers;
  for (const auto& [key, entry] : g_cache) callers.insert(key.caller);
  for (int caller : callers) evict_least_recent(g_cache, caller, g_capacity);
}

int64_t conv2d_cache_capacity() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return g_capacity;
}

void set_conv2d_strategy(Conv2dStrategy strategy) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_strategy = strategy;
}

Conv2dStrategy conv2d_strategy() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return g_strategy;
}

}  // namespace hfta::cpu
