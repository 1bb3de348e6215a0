#include "workflows/export.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "models/model.h"

namespace hfta {

std::vector<SafeTensor> state_dict(const Model& model, int64_t b) {
  HFTA_CHECK(b >= 0 && b < model.B(), "{}: no model {} in an array of {}", model.name(), b,
             model.B());
  std::vector<SafeTensor> out;
  for (const Param& p : model.params()) {
    const TensorView v = p.value.replica(b);
    SafeTensor t{.name = p.name};
    if (p.torch_transposed) {  // [in, out] here, [out, in] in PyTorch
      const int64_t in = v.shape[0], outs = v.shape[1];
      t.shape = {outs, in};
      t.floats.resize(static_cast<size_t>(v.numel()));
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < outs; ++o) t.floats[static_cast<size_t>(o * in + i)] = v[i * outs + o];
    } else {
      t.shape.assign(v.shape.begin(), v.shape.end());
      t.floats.assign(v.data, v.data + v.numel());
    }
    out.push_back(std::move(t));
  }
  for (const ModelBuffer& buf : model.buffers()) {
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
