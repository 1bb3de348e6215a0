#include "run/export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>

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

namespace {

// The shape PyTorch gives a parameter stored here as `here` (export's layout).
std::vector<int64_t> torch_shape(const Param& p, const Shape& here) {
  if (!p.torch_transposed) return std::vector<int64_t>(here.begin(), here.end());
  std::vector<int64_t> shape = {here[1], here[0]};
  if (p.torch_kernel1) shape.push_back(1);
  return shape;
}

}  // namespace

void load_state_dict(Model& model, int64_t b, const std::vector<SafeTensor>& tensors,
                     const std::string& source) {
  HFTA_CHECK(b >= 0 && b < model.B(), "{}: no model {} in an array of {}", model.name(), b,
             model.B());
  load_state_dict(model.net(), b, tensors, source);
}

void load_state_dict(Net& net, int64_t b, const std::vector<SafeTensor>& tensors,
                     const std::string& source) {
  HFTA_CHECK(b >= 0 && b < net.B(), "no model {} in an array of {}", b, net.B());
  std::map<std::string, const SafeTensor*> by_name;
  for (const SafeTensor& t : tensors)
    HFTA_CHECK(by_name.emplace(t.name, &t).second, "{}: tensor \"{}\" appears twice", source,
               t.name);
  std::vector<std::string> missing, misshapen;
  auto check = [&](const std::string& name, const std::vector<int64_t>& shape, bool integer) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(name);
      return;
    }
    const SafeTensor& t = *it->second;
    if (t.shape != shape || (t.dtype == "I64") != integer)
      misshapen.push_back(fmt::format("{} is {} [{}], the model's is {} [{}]", name, t.dtype,
                                      fmt::join(t.shape, ", "), integer ? "I64" : "F32",
                                      fmt::join(shape, ", ")));
    by_name.erase(it);
  };
  for (const Param& p : net.params())
    check(p.name, torch_shape(p, p.value.replica(b).shape), false);
  for (const ModelBuffer& buf : net.buffers()) {
    const Shape& s = buf.value.replica(b).shape;
    check(buf.name, std::vector<int64_t>(s.begin(), s.end()), buf.integer);
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, t] : by_name) unexpected.push_back(name);
  HFTA_CHECK(missing.empty() && misshapen.empty() && unexpected.empty(),
             "{} does not hold this model's state_dict:{}{}{} (was it exported from another "
             "architecture or with other --image-size, --num-classes or data?)",
             source, missing.empty() ? "" : fmt::format(" missing {};", fmt::join(missing, ", ")),
             unexpected.empty() ? "" : fmt::format(" unexpected {};", fmt::join(unexpected, ", ")),
             misshapen.empty() ? "" : fmt::format(" {}", fmt::join(misshapen, "; ")));
  std::map<std::string, const SafeTensor*> all;
  for (const SafeTensor& t : tensors) all[t.name] = &t;
  for (const Param& p : net.params()) {
    TensorView v = p.value.replica(b);
    const std::vector<float>& f = all.at(p.name)->floats;
    if (p.torch_transposed) {  // [out, in] there, [in, out] here
      const int64_t in = v.shape[0], outs = v.shape[1];
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < outs; ++o)
          v.data[i * outs + o] = f[static_cast<size_t>(o * in + i)];
    } else {
      std::copy(f.begin(), f.end(), v.data);
    }
  }
  for (const ModelBuffer& buf : net.buffers()) {
    TensorView v = buf.value.replica(b);
    const SafeTensor& t = *all.at(buf.name);
    for (int64_t i = 0; i < v.numel(); ++i)
      v.data[i] = buf.integer ? static_cast<float>(t.integers[static_cast<size_t>(i)])
                              : t.floats[static_cast<size_t>(i)];
  }
}

}  // namespace hfta
