// The ops op_bench knows: each case builds its buffers for a given B and returns a closure that
// runs one forward + backward (or one optimizer step), plus its FLOP count for all B models.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/runtime.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "fused_ops/linear.h"

namespace hfta::bench {

using Options = std::map<std::string, std::string>;

struct OpCase {
  std::string description;
  double flops = 0.0;  // per call, all B models
  std::function<void()> run;
};

// Applies the knobs every case accepts: gemm=onednn|openblas, par=auto|models|inside.
inline void apply_common_options(const Options& o) {
  auto get = [&](const char* key) {
    auto it = o.find(key);
    return it == o.end() ? std::string() : it->second;
  };
  std::string gemm = get("gemm"), par = get("par");
  HFTA_CHECK(gemm.empty() || gemm == "onednn" || gemm == "openblas",
             "gemm={} is not known: use gemm=onednn or gemm=openblas", gemm);
  HFTA_CHECK(par.empty() || par == "auto" || par == "models" || par == "inside",
             "par={} is not known: use par=auto, par=models or par=inside", par);
  if (!gemm.empty())
    cpu::set_gemm_backend(gemm == "openblas" ? cpu::GemmBackend::kOpenBlas
                                             : cpu::GemmBackend::kOneDnn);
  if (!par.empty())
    cpu::set_model_parallelism(par == "models"   ? cpu::ModelParallelism::kAcrossModels
                               : par == "inside" ? cpu::ModelParallelism::kInsideOp
                                                 : cpu::ModelParallelism::kAuto);
}

inline int num_threads_in_use() { return num_threads(); }

inline int64_t option(const Options& o, const std::string& key, int64_t fallback) {
  auto it = o.find(key);
  return it == o.end() ? fallback : std::stoll(it->second);
}

// A bag of seeded float buffers that lives as long as the closure that uses it.
struct Buffers {
  std::vector<std::vector<float>> storage;
  RngStream rng{7, 0};
  TensorView make(Shape s) {
    storage.emplace_back(static_cast<size_t>(s.numel()));
    for (float& v : storage.back()) v = rng.uniform(-1.0f, 1.0f);
    return TensorView(storage.back().data(), s);
  }
};

inline OpCase linear_case(int64_t B, const Options& o) {
  LinearParams p{B, option(o, "N", 64), option(o, "in", 784), option(o, "out", 256), true,
                 option(o, "shared", 0) != 0};
  auto buf = std::make_shared<Buffers>();
  TensorView x = buf->make(p.x_shape()), w = buf->make(p.weight_shape());
  TensorView bias = buf->make(p.bias_shape()), y = buf->make(p.y_shape());
  TensorView dy = buf->make(p.y_shape()), dw = buf->make(p.weight_shape());
  TensorView db = buf->make(p.bias_shape());
  TensorView dx = p.shared_input ? TensorView() : buf->make(p.x_shape());
  return {fmt::format("N={} {}->{}{}", p.N, p.in_features, p.out_features,
                      p.shared_input ? " shared" : ""),
          3.0 * p.forward_flops() - (p.shared_input ? p.forward_flops() : 0.0),
          [=, keep_alive = buf] {
            linear_forward(p, x, w, bias, y);
            linear_backward(p, x, w, dy, dx, dw, db);
          }};
}

using CaseFactory = OpCase (*)(int64_t, const Options&);

inline const std::map<std::string, CaseFactory>& case_table() {
  static const std::map<std::string, CaseFactory> table = {
      {"linear", linear_case},
  };
  return table;
}

inline std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : case_table()) names.push_back(name);
  return names;
}

inline OpCase make_case(const std::string& op, int64_t B, const Options& o) {
  auto it = case_table().find(op);
  HFTA_CHECK(it != case_table().end(), "unknown op '{}': choose one of {}", op,
             fmt::join(case_names(), ", "));
  apply_common_options(o);
  return it->second(B, o);
}

}  // namespace hfta::bench
