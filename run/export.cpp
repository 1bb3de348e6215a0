#include "run/export.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "models/model.h"

namespace hfta {

std::vector<SafeTensor> state_dict(const Model& model, int64_t b) {
  HFTA_CHECK(b >= 0 && b < model.B(), "{}: no model {} in an array of {}", model.name(), b,
             model.B());
  return state_dict(model.net(), b);
}

std::vector<SafeTensor> state_dict(const Net& net, int64_t b) {
  HFTA_CHECK(b >= 0 && b < net.B(), "no model {} in an array of {}", b, net.B());
  std::vector<SafeTensor> out;
  for (const Param& p : net.params()) {
    const TensorView v = p.value.replica(b);
    SafeTensor t{.name = p.name};
    if (p.torch_transposed) {  // [in, out] here, [out, in] in PyTorch
      const int64_t in = v.shape[0], outs = v.shape[1];
      t.shape = {outs, in};
      t.floats.resize(static_cast<size_t>(v.numel()));
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < outs; ++o)
          t.floats[static_cast<size_t>(o * in + i)] = v[i * outs + o];
      if (p.torch_kernel1) t.shape.push_back(1);  // Conv1d(kernel 1): [out, in, 1]
    } else {
      t.shape.assign(v.shape.begin(), v.shape.end());
      t.floats.assign(v.data, v.data + v.numel());
    }
    out.push_back(std::move(t));
  }
  for (const ModelBuffer& buf : net.buffers()) {
    const TensorView v = buf.value.replica(b);
    SafeTensor t{.name = buf.name, .shape = std::vector<int64_t>(v.shape.begin(), v.shape.end())};
    if (buf.integer) {
      t.dtype = "I64";
      for (int64_t i = 0; i < v.numel(); ++i) t.integers.push_back(std::llround(v[i]));
    } else {
      t.floats.assign(v.data, v.data + v.numel());
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace hfta
