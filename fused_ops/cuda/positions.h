// The CUDA position encodings (fused_ops/positions.h's contract), called by the dispatch in
// fused_ops/positions.cpp for device tensors. Declared here, beside the kernels, so the op's
// contract header stays backend-neutral.
#pragma once

#include "fused_ops/positions.h"

namespace hfta::cuda {
void positions_forward(const PositionsParams& p, const PositionsForwardArgs& a);
void positions_backward(const PositionsParams& p, const PositionsBackwardArgs& a);
}  // namespace hfta::cuda
