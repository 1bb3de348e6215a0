// CUDA fused concatenation (the contract is fused_ops/concat.h), through the kernels of
// concat_kernels.cu: one launch per input (per wanted gradient backward), each a copy into or out
// of its slice of y, so the CPU op's bits.
#include "fused_ops/concat.h"

#include "backend/cuda/runtime.h"
#include "fused_ops/cuda/concat_kernels.h"

namespace hfta::cuda {

namespace {

// The outer blocks (as fused_ops/cpu/concat.cpp counts them) and input i's slice of each.
struct Geometry {
  int64_t blocks = 0;
  concat_math::Slice slice[kMaxConcatInputs];
};

Geometry geometry_of(const ConcatParams& p) {
  const bool rows = p.layout == ConcatLayout::kRows;
  const int64_t unit = rows ? 1 : p.S;  // floats per feature in a block
  Geometry g{.blocks = rows ? p.B * p.R : p.N * p.B};
  int64_t offset = 0;
  for (int i = 0; i < p.inputs; ++i) {
    g.slice[i] = {.run = p.C[i] * unit, .y_run = p.total_C() * unit, .offset = offset};
    offset += p.C[i] * unit;
  }
  return g;
}

}  // namespace

void concat_forward(const ConcatParams& p, const ConcatForwardArgs& a) {
  const Geometry g = geometry_of(p);
  for (int i = 0; i < p.inputs; ++i)
    check(kernels::concat_forward_input(a.x[i].data, a.y.data, g.slice[i], g.blocks, stream()),
          "concat_forward kernel launch");
}

void concat_backward(const ConcatParams& p, const ConcatBackwardArgs& a) {
  const Geometry g = geometry_of(p);
  for (int i = 0; i < p.inputs; ++i) {
    if (a.dx[i].empty()) continue;
    check(kernels::concat_backward_input(a.dy.data, a.dx[i].data, g.slice[i], g.blocks,
                                         a.accumulate_dx[i], stream()),
          "concat_backward kernel launch");
  }
}

}  // namespace hfta::cuda
