// The process-wide oneDNN CPU engine and stream, and small helpers to wrap our plain row-major
// buffers as oneDNN memory. Vendor header: include only from cpu/ folders.
#pragma once

#include <dnnl.hpp>
#include <vector>

#include "core/tensor.h"

namespace hfta::cpu {

dnnl::engine& dnnl_engine();
dnnl::stream& dnnl_stream();

inline dnnl::memory::dims dims_of(const Shape& s) { return dnnl::memory::dims(s.begin(), s.end()); }

// Plain (row-major) f32 memory descriptor for a shape.
inline dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

// Wraps a user buffer; reorders into `want` when the primitive chose another layout, returning
// the memory to pass to the primitive.
dnnl::memory to_layout(const dnnl::memory& user, const dnnl::memory::desc& want);
// Copies `from` (primitive layout) back to `user` when they differ.
void from_layout(const dnnl::memory& from, const dnnl::memory& user);

}  // namespace hfta::cpu
