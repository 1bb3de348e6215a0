// One table-driven harness for every op family (in the spirit of ggml's test-backend-ops).
//
// A test file describes its op once, as an adapter (struct with Params, tensors(), run(),
// describe(); see LinearOp in tests/fused_ops/test_linear.cpp), and lists cases: params, B,
// threads, GEMM backend, conv strategy, accumulate_dx, write_dparams, no dx, finite differences.
// Each case is its own gtest test (value-parameterized, named after the case), and run_case()
// checks:
//   1. fast(B) == B reference single-model runs: every output, saved tensor, running state,
//      parameter gradient and input gradient, model by model;
//   2. outputs start as garbage (NaN and +-1e30, int -7), so an element a kernel forgets to
//      write, or reads before writing, shows up; parameter gradients start random and must end
//      at start + gradient (+=), or with write_dparams start as garbage and must end at the
//      gradient (=, the ops' accumulate_dparams = false); input gradients start as garbage, or
//      random with accumulate_dx (then they must end at start + gradient; the reference's
//      accumulate_dx is checked the same way against its own gradient written over garbage);
//   3. with fd: the reference's gradients against central finite differences (model 0, B = 1).
//   4. deterministic mode (core/determinism.h): fast(B) on the case's threads gives every model
//      the bits of fast(B = 1) on one thread, for every output, saved tensor, state and gradient
//      but a shared input's gradient (a sum over the models).
// A case with device = kCuda runs the fast path on the GPU: every tensor, garbage included, is
// copied into a device arena of its own, the op runs there and everything is copied back before
// the same checks (check 4: fast(B) on the device against fast(1) on the device). Such a case is
// skipped where the device is absent (a build without CUDA, a machine without a GPU).
// device_cases() turns a file's CPU case list into its device cases. An adapter reaches tensor
// memory only through the ops and copy_values (never std::memcpy): the views may be the device's.
// An adapter may also define tolerance(one_params, single_views, spec) -> {atol, rtol}: the
// tolerance of one compared tensor from model b's reference run (its inputs, outputs and saved
// statistics), for errors that scale with the data (normalization's rstd); else spec's.
// Seeds: see tests/test_util.h (a case's seed depends only on HFTA_TEST_SEED and its name).
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/runtime.h"
#include "core/arena.h"
#include "core/determinism.h"
#include "core/device_memory.h"
#include "core/parallel.h"
#include "fused_ops/conv2d.h"
#include "sanitizer.h"
#include "test_util.h"

namespace hfta::test {

// How a tensor holds the B models: [B, ...] (model b's block contiguous), [N, B*C, ...] (the
// conv family's channels), or one tensor shared by every model (the minibatch, labels).
enum class Layout { kModelMajor, kChannels, kShared };

// kInput: random in [lo, hi]. kState: random in [lo, hi], updated in place (running stats).
// kOutput / kSaved: written by the op (start as garbage). kParamGrad: accumulates (+=) onto a
// random start, or with write_dparams is written (=) over garbage. kInputGrad: written (garbage
// start), or accumulated onto a random start with accumulate_dx; a kShared input gradient gets the
// sum over models.
enum class Role { kInput, kState, kOutput, kSaved, kParamGrad, kInputGrad };

// How kInput / kState floats are drawn: uniform in [lo, hi]; uniform with every third value
// rounded to a multiple of 0.5 (ties inside max-pooling windows: the first maximum must win); or
// a shuffled ramp from lo in steps of (hi - lo) / numel (distinct values, for finite differences
// across a max: keep numel * 2 * eps below hi - lo).
enum class Fill { kUniform, kTies, kDistinct };

struct TensorSpec {
  std::string name;
  Shape shape;  // for the params passed to tensors() (fused B, or B = 1)
  Layout layout = Layout::kModelMajor;
  Role role = Role::kInput;
  double atol = 1e-5, rtol = 1e-5;
  float lo = -1.0f, hi = 1.0f;  // kInput / kState values
  bool is_index = false;        // int32 (argmax, labels): inputs draw integers in [lo, hi)
  int64_t channels = 0;         // kChannels: channels per model (shape[1] = B * channels)
  Fill fill = Fill::kUniform;
  // kInput / kState: applied to the values after the fill (values at an op's kinks, or away).
  std::function<void(std::vector<float>&)> adjust;
};

// The tensors of one run, by name; a name that is absent is an empty view.
struct Views {
  std::map<std::string, TensorView> f;
  std::map<std::string, IndexView> i;
  TensorView operator()(const std::string& name) const {
    auto it = f.find(name);
    return it == f.end() ? TensorView() : it->second;
  }
  IndexView index(const std::string& name) const {
    auto it = i.find(name);
    return it == i.end() ? IndexView() : it->second;
  }
};

struct RunContext {
  bool ref = false;         // run ref:: (else the dispatching fast path)
  int64_t first_model = 0;  // model index of the first model in this run (for RNG streams)
  bool accumulate_dx = false;
  bool write_dparams = false;  // the fast path writes parameter gradients (accumulate_dparams)
  bool forward_only = false;   // finite differences re-run the forward alone
  uint64_t seed = 0;           // the case's seed (dropout streams derive from it)
};

template <typename P>
struct OpCase {
  std::string name;  // [A-Za-z0-9_] only: it is the gtest name
  P p{};             // p.B is overwritten by B
  int64_t B = 1;
  int threads = 2;
  cpu::GemmBackend gemm = cpu::GemmBackend::kOneDnn;
  cpu::Conv2dStrategy strategy = cpu::Conv2dStrategy::kAuto;
  cpu::ModelParallelism parallelism = cpu::ModelParallelism::kAuto;
  bool accumulate_dx = false;
  bool write_dparams = false;    // parameter gradients written (=) over garbage, not added to
  bool no_dx = false;            // no input gradient wanted (a first layer)
  bool fd = false;               // also check the reference against finite differences
  Device device = Device::kCpu;  // where the fast path runs (the reference: always the host)
};

// `from` copied into `to` (same shape) on whatever devices they are: for adapters that prepare
// an in-place run by copying one tensor over another.
inline void copy_values(const TensorView& from, const TensorView& to) {
  copy_view(from, to, "op harness copy");
}

template <typename P>
void PrintTo(const OpCase<P>& c, std::ostream* os) {
  *os << c.name;
}

// gtest's name generator for INSTANTIATE_TEST_SUITE_P.
struct CaseName {
  template <typename T>
  std::string operator()(const ::testing::TestParamInfo<T>& info) const {
    return info.param.name;
  }
};

namespace detail {

struct HBuf {
  TensorSpec spec;
  std::vector<float> f;
  std::vector<int32_t> i;
  int64_t numel() const { return spec.shape.numel(); }
};

inline void fill_garbage(HBuf& b) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float pattern[] = {nan, 1e30f, nan, -1e30f, nan, 3e29f};
  for (size_t k = 0; k < b.f.size(); ++k) b.f[k] = pattern[k % 6];
  for (auto& v : b.i) v = -7;
}

inline void fill_random(HBuf& b, RngStream& rng) {
  for (auto& v : b.f) v = rng.uniform(b.spec.lo, b.spec.hi);
  if (b.spec.fill == Fill::kTies)
    for (size_t k = 0; k < b.f.size(); k += 3) b.f[k] = std::round(b.f[k] * 2.0f) / 2.0f;
  if (b.spec.fill == Fill::kDistinct) {
    const float step =
        (b.spec.hi - b.spec.lo) / static_cast<float>(std::max<size_t>(1, b.f.size()));
    for (size_t k = 0; k < b.f.size(); ++k) b.f[k] = b.spec.lo + step * static_cast<float>(k);
    for (size_t k = b.f.size(); k > 1; --k) std::swap(b.f[k - 1], b.f[rng.below(k)]);
  }
  if (b.spec.adjust) b.spec.adjust(b.f);
  const int64_t range = std::max<int64_t>(1, int64_t(b.spec.hi) - int64_t(b.spec.lo));
  for (auto& v : b.i) v = static_cast<int32_t>(int64_t(b.spec.lo) + int64_t(rng.below(range)));
}

inline HBuf make(const TensorSpec& s) {
  HBuf b{s, {}, {}};
  if (s.is_index)
    b.i.assign(static_cast<size_t>(s.shape.numel()), 0);
  else
    b.f.assign(static_cast<size_t>(s.shape.numel()), 0.0f);
  return b;
}

// Calls f(fused_offset, single_offset, count) for the runs of model b's slice.
template <typename F>
void for_each_run(const TensorSpec& fused, const TensorSpec& one, int64_t B, int64_t b, F&& f) {
  switch (fused.layout) {
    case Layout::kShared:
      f(0, 0, one.shape.numel());
      return;
    case Layout::kModelMajor: {
      const int64_t per = one.shape.numel();
      f(b * per, 0, per);
      return;
    }
    case Layout::kChannels: {
      const int64_t N = fused.shape[0], run = one.shape.numel() / N;
      for (int64_t n = 0; n < N; ++n) f((n * B + b) * run, n * run, run);
      return;
    }
  }
}

template <typename T>
void copy_slice(const std::vector<T>& from, std::vector<T>& to, const TensorSpec& fused,
                const TensorSpec& one, int64_t B, int64_t b, bool to_single) {
  for_each_run(fused, one, B, b, [&](int64_t fo, int64_t so, int64_t count) {
    if (to_single)
      std::copy_n(from.begin() + fo, count, to.begin() + so);
    else
      std::copy_n(from.begin() + so, count, to.begin() + fo);
  });
}

inline Views views_of(std::map<std::string, HBuf>& bufs) {
  Views v;
  for (auto& [name, b] : bufs) {
    if (b.spec.is_index)
      v.i[name] = IndexView(b.i.data(), b.spec.shape);
    else
      v.f[name] = TensorView(b.f.data(), b.spec.shape);
  }
  return v;
}

// The dispatching fast path over `bufs` on `device`: on the host in place; elsewhere through one
// device arena per tensor, filled from the host buffer (garbage included) and copied back after
// the op, so the checks read the device's results from the same host buffers.
template <typename Op>
void run_fast(const typename Op::Params& p, std::map<std::string, HBuf>& bufs,
              const RunContext& ctx, Device device) {
  if (device == Device::kCpu) {
    Op::run(p, views_of(bufs), ctx);
    return;
  }
  std::vector<Arena> arenas;
  arenas.reserve(bufs.size());
  Views on_device;
  for (auto& [name, b] : bufs) {
    Arena counting(device);
    if (b.spec.is_index)
      counting.carve<int32_t>(b.spec.shape);
    else
      counting.carve<float>(b.spec.shape);
    Arena& arena = arenas.emplace_back(std::max<size_t>(counting.used(), 64), name, device);
    if (b.spec.is_index) {
      const IndexView d = arena.carve<int32_t>(b.spec.shape);
      if (b.numel() > 0) copy_view(IndexView(b.i.data(), b.spec.shape), d, name);
      on_device.i[name] = d;
    } else {
      const TensorView d = arena.carve<float>(b.spec.shape);
      if (b.numel() > 0) copy_view(TensorView(b.f.data(), b.spec.shape), d, name);
      on_device.f[name] = d;
    }
  }
  Op::run(p, on_device, ctx);
  synchronize(device);
  for (auto& [name, b] : bufs) {
    if (b.numel() == 0) continue;
    if (b.spec.is_index)
      copy_view(on_device.i.at(name), IndexView(b.i.data(), b.spec.shape), name);
    else
      copy_view(on_device.f.at(name), TensorView(b.f.data(), b.spec.shape), name);
  }
}

// Restores the thread count, GEMM backend and conv strategy a case changed.
struct Settings {
  int threads = num_threads();
  cpu::GemmRouting gemm = cpu::gemm_routing();
  cpu::Conv2dStrategy strategy = cpu::conv2d_strategy();
  cpu::ModelParallelism parallelism = cpu::model_parallelism();
  bool deterministic = hfta::deterministic();
  ~Settings() {
    set_deterministic(deterministic);
    cpu::set_model_parallelism(parallelism);
    cpu::set_num_threads(threads);
    cpu::set_gemm_routing(gemm);
    cpu::set_conv2d_strategy(strategy);
  }
};

}  // namespace detail

// The reference's gradients (B = 1, from zero) against central finite differences of
// L = sum over Op::loss_pairs() of output * output_gradient, for every Op::grad_pairs() entry.
template <typename Op>
void check_finite_differences(const typename Op::Params& p, const std::vector<TensorSpec>& specs,
                              uint64_t seed) {
  SCOPED_TRACE("reference vs finite differences");
  RngStream rng(seed, 1);
  std::map<std::string, detail::HBuf> bufs;
  for (const TensorSpec& s : specs) {
    detail::HBuf b = detail::make(s);
    if (s.role == Role::kInput || s.role == Role::kState) detail::fill_random(b, rng);
    bufs.emplace(s.name, std::move(b));
  }
  Views v = detail::views_of(bufs);
  const RunContext full{.ref = true, .seed = seed};
  Op::run(p, v, full);
  RunContext fwd = full;
  fwd.forward_only = true;
  auto loss = [&] {
    Op::run(p, v, fwd);
    double l = 0.0;
    for (const auto& [out, dout] : Op::loss_pairs()) {
      const auto &o = bufs.at(out).f, &g = bufs.at(dout).f;
      for (size_t e = 0; e < o.size(); ++e) l += double(o[e]) * g[e];
    }
    return l;
  };
  const auto [eps, atol, rtol] = Op::fd_tolerance();
  for (const auto& [in, din] : Op::grad_pairs()) {
    if (!bufs.count(in) || !bufs.count(din)) continue;
    auto& x = bufs.at(in).f;
    std::vector<float> numeric(x.size());
    for (size_t e = 0; e < x.size(); ++e) {
      const float saved = x[e];
      x[e] = saved + static_cast<float>(eps);
      const double plus = loss();
      x[e] = saved - static_cast<float>(eps);
      const double minus = loss();
      x[e] = saved;
      numeric[e] = static_cast<float>((plus - minus) / (2.0 * eps));
    }
    const auto& analytic = bufs.at(din).f;
    expect_close(analytic.data(), numeric.data(), static_cast<int64_t>(numeric.size()), atol, rtol,
                 din + " vs finite differences");
  }
}

// Check 4 of run_case: under deterministic mode, model b of fast(B) on c.threads threads is bit
// for bit fast(B = 1) on one thread, from the same starting values.
template <typename Op>
void check_deterministic(const OpCase<typename Op::Params>& c, const typename Op::Params& fused_p,
                         const typename Op::Params& one_p,
                         const std::vector<TensorSpec>& fused_specs,
                         const std::vector<TensorSpec>& one_specs,
                         const std::map<std::string, detail::HBuf>& start, uint64_t seed) {
  SCOPED_TRACE("deterministic mode: fast(B) against fast(1) on one thread");
  set_deterministic(true);
  std::map<std::string, detail::HBuf> fused = start;
  detail::run_fast<Op>(fused_p, fused,
                       RunContext{.ref = false,
                                  .accumulate_dx = c.accumulate_dx,
                                  .write_dparams = c.write_dparams,
                                  .seed = seed},
                       c.device);
  cpu::set_num_threads(1);
  for (int64_t b = 0; b < c.B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    std::map<std::string, detail::HBuf> one;
    for (size_t k = 0; k < one_specs.size(); ++k) {
      detail::HBuf buf = detail::make(one_specs[k]);
      const detail::HBuf& from = start.at(fused_specs[k].name);
      if (buf.spec.is_index)
        detail::copy_slice(from.i, buf.i, fused_specs[k], one_specs[k], c.B, b, true);
      else
        detail::copy_slice(from.f, buf.f, fused_specs[k], one_specs[k], c.B, b, true);
      one.emplace(one_specs[k].name, std::move(buf));
    }
    detail::run_fast<Op>(one_p, one,
                         RunContext{.ref = false,
                                    .first_model = b,
                                    .accumulate_dx = c.accumulate_dx,
                                    .write_dparams = c.write_dparams,
                                    .seed = seed},
                         c.device);
    for (size_t k = 0; k < one_specs.size(); ++k) {
      const TensorSpec &fs = fused_specs[k], &os = one_specs[k];
      if (fs.role == Role::kInput || fs.layout == Layout::kShared) continue;
      const detail::HBuf& got = fused.at(fs.name);
      const detail::HBuf& want = one.at(os.name);
      int64_t differ = 0;
      double worst = 0.0;
      if (os.is_index) {
        std::vector<int32_t> slice(want.i.size());
        detail::copy_slice(got.i, slice, fs, os, c.B, b, true);
        for (size_t e = 0; e < slice.size(); ++e) differ += slice[e] != want.i[e];
      } else {
        std::vector<float> slice(want.f.size());
        detail::copy_slice(got.f, slice, fs, os, c.B, b, true);
        for (size_t e = 0; e < slice.size(); ++e) {
          const bool same = std::memcmp(&slice[e], &want.f[e], sizeof(float)) == 0;
          differ += !same;
          if (!same) worst = std::max(worst, std::fabs(double(slice[e]) - double(want.f[e])));
        }
      }
      EXPECT_EQ(differ, 0) << fs.name << ": " << differ << " of " << want.numel()
                           << " elements differ in their bits (largest difference " << worst << ")";
    }
  }
}

// Runs one case of adapter Op (see the top of this file).
template <typename Op>
void run_case(const OpCase<typename Op::Params>& c) {
  using detail::HBuf;
  if (!device_available(c.device))
    GTEST_SKIP() << "no " << device_flag_name(c.device) << " device: " << describe_device(c.device);
  const uint64_t seed = case_seed(c.name);
  HFTA_CASE_TRACE(seed);
  typename Op::Params fused_p = c.p, one_p = c.p;
  fused_p.B = c.B;
  one_p.B = 1;
  SCOPED_TRACE(
      fmt::format("B={} threads={} gemm={} strategy={} accumulate_dx={} write_dparams={} "
                  "no_dx={} device={} {}",
                  c.B, c.threads, c.gemm == cpu::GemmBackend::kOneDnn ? "onednn" : "openblas",
                  static_cast<int>(c.strategy), c.accumulate_dx, c.write_dparams, c.no_dx,
                  device_flag_name(c.device), Op::describe(fused_p)));
  detail::Settings restore;
  cpu::set_num_threads(c.threads);
  cpu::set_gemm_backend(c.gemm);
  cpu::set_conv2d_strategy(c.strategy);
  cpu::set_model_parallelism(c.parallelism);

  const std::vector<TensorSpec> fused_specs = Op::tensors(fused_p, c);
  const std::vector<TensorSpec> one_specs = Op::tensors(one_p, c);
  ASSERT_EQ(fused_specs.size(), one_specs.size());
  RngStream rng(seed, 0);
  std::map<std::string, HBuf> fused, start;
  for (const TensorSpec& s : fused_specs) {
    HBuf b = detail::make(s);
    const bool random = s.role == Role::kInput || s.role == Role::kState ||
                        (s.role == Role::kParamGrad && !c.write_dparams) ||
                        (s.role == Role::kInputGrad && c.accumulate_dx);
    if (random)
      detail::fill_random(b, rng);
    else
      detail::fill_garbage(b);
    start.emplace(s.name, b);
    fused.emplace(s.name, std::move(b));
  }
  detail::run_fast<Op>(fused_p, fused,
                       RunContext{.ref = false,
                                  .accumulate_dx = c.accumulate_dx,
                                  .write_dparams = c.write_dparams,
                                  .seed = seed},
                       c.device);

  // Model by model through the reference, each from its slice of the same starting values.
  std::map<std::string, std::vector<double>> shared_grad_sum;  // kShared input gradients
  for (int64_t b = 0; b < c.B; ++b) {
    SCOPED_TRACE(fmt::format("model b={}", b));
    // Model b's slices of the starting values; input gradients start as garbage unless
    // `accumulate` (a shared one from zeros: the models' gradients are summed).
    auto single = [&](bool accumulate) {
      std::map<std::string, HBuf> one;
      for (size_t k = 0; k < one_specs.size(); ++k) {
        const TensorSpec &fs = fused_specs[k], &os = one_specs[k];
        HBuf buf = detail::make(os);
        const HBuf& from = start.at(fs.name);
        if (os.is_index)
          detail::copy_slice(from.i, buf.i, fs, os, c.B, b, true);
        else
          detail::copy_slice(from.f, buf.f, fs, os, c.B, b, true);
        // Written parameter gradients: the reference adds its gradient to zeros.
        if (fs.role == Role::kParamGrad && c.write_dparams)
          std::fill(buf.f.begin(), buf.f.end(), 0.0f);
        if (fs.role == Role::kInputGrad && !accumulate) {
          if (fs.layout == Layout::kShared && accumulate == c.accumulate_dx)
            std::fill(buf.f.begin(), buf.f.end(), 0.0f);  // written (=): start from zeros to sum
          else
            detail::fill_garbage(buf);
        }
        one.emplace(os.name, std::move(buf));
      }
      return one;
    };
    std::map<std::string, HBuf> one = single(c.accumulate_dx);
    Views v = detail::views_of(one);
    Op::run(
        one_p, v,
        RunContext{.ref = true, .first_model = b, .accumulate_dx = c.accumulate_dx, .seed = seed});
    if (c.accumulate_dx) {
      // The reference's own accumulate_dx: start + the gradient it writes over garbage.
      std::map<std::string, HBuf> plain = single(false);
      Views pv = detail::views_of(plain);
      Op::run(one_p, pv, RunContext{.ref = true, .first_model = b, .seed = seed});
      for (size_t k = 0; k < one_specs.size(); ++k) {
        const TensorSpec &fs = fused_specs[k], &os = one_specs[k];
        if (fs.role != Role::kInputGrad) continue;
        std::vector<float> s0(plain.at(os.name).f.size()), want(s0.size());
        detail::copy_slice(start.at(fs.name).f, s0, fs, os, c.B, b, true);
        for (size_t e = 0; e < want.size(); ++e) want[e] = s0[e] + plain.at(os.name).f[e];
        expect_close(one.at(os.name).f.data(), want.data(), static_cast<int64_t>(want.size()), 1e-6,
                     1e-6, os.name + ": reference accumulate_dx gives start + gradient");
      }
    }
    for (size_t k = 0; k < one_specs.size(); ++k) {
      const TensorSpec &fs = fused_specs[k], &os = one_specs[k];
      if (fs.role == Role::kInput) continue;
      const HBuf& got = fused.at(fs.name);
      const HBuf& want = one.at(os.name);
      double atol = fs.atol, rtol = fs.rtol;
      if constexpr (requires { Op::tolerance(one_p, v, os); })
        std::tie(atol, rtol) = Op::tolerance(one_p, v, os);
      if (fs.layout == Layout::kShared) {
        // Summed over models: compare once all models ran.
        auto& sum = shared_grad_sum[fs.name];
        if (sum.empty()) sum.assign(want.f.size(), 0.0);
        const HBuf& s0 = start.at(fs.name);
        for (size_t e = 0; e < want.f.size(); ++e)
          sum[e] += double(want.f[e]) - (c.accumulate_dx ? double(s0.f[e]) : 0.0);
        continue;
      }
      if (os.is_index) {
        std::vector<int32_t> slice(want.i.size());
        detail::copy_slice(got.i, slice, fs, os, c.B, b, true);
        int64_t misses = 0;
        for (size_t e = 0; e < slice.size(); ++e) misses += slice[e] != want.i[e];
        EXPECT_EQ(misses, 0) << fs.name << ": " << misses << " of " << slice.size()
                             << " indices differ";
      } else {
        std::vector<float> slice(want.f.size());
        detail::copy_slice(got.f, slice, fs, os, c.B, b, true);
        expect_close(slice.data(), want.f.data(), static_cast<int64_t>(slice.size()), atol, rtol,
                     fs.name);
      }
    }
  }
  for (auto& [name, sum] : shared_grad_sum) {
    const HBuf& got = fused.at(name);
    const HBuf& s0 = start.at(name);
    std::vector<float> want(sum.size());
    for (size_t e = 0; e < sum.size(); ++e)
      want[e] = static_cast<float>(sum[e] + (c.accumulate_dx ? double(s0.f[e]) : 0.0));
    const double scale = std::sqrt(double(c.B));
    expect_close(got.f.data(), want.data(), static_cast<int64_t>(want.size()),
                 got.spec.atol * scale, got.spec.rtol * scale, name + " (sum over models)");
  }

  if (c.fd) check_finite_differences<Op>(one_p, one_specs, seed);
  // Not under sanitizers: the release suite runs it, and it doubles the op tests' time.
  if (!test::kSanitized)
    check_deterministic<Op>(c, fused_p, one_p, fused_specs, one_specs, start, seed);
}

// The cases of a CPU list again, on `device` (those `keep` accepts, when given: the op kinds that
// have a kernel there). Cases that differ only in CPU settings (threads, GEMM library, conv
// strategy, model parallelism) run once, under the first one's name; finite differences check the
// reference, so the CPU cases already did.
template <typename Op>
std::vector<OpCase<typename Op::Params>> device_cases(
    const std::vector<OpCase<typename Op::Params>>& cases, Device device,
    const std::function<bool(const OpCase<typename Op::Params>&)>& keep = {}) {
  std::vector<OpCase<typename Op::Params>> out;
  std::set<std::string> seen;
  for (OpCase<typename Op::Params> c : cases) {
    if (keep && !keep(c)) continue;
    typename Op::Params p = c.p;
    p.B = c.B;
    const std::string key = fmt::format("{} B={} accumulate_dx={} no_dx={}", Op::describe(p), c.B,
                                        c.accumulate_dx, c.no_dx);
    if (!seen.insert(key).second) continue;
    c.device = device;
    c.fd = false;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace hfta::test
