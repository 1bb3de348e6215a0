// The CUDA LayerNorm (fused_ops/layernorm.h's contract), called by the dispatch in
// fused_ops/layernorm.cpp for device tensors. Declared here, beside the kernels, so the op's
// contract header stays backend-neutral.
#pragma once

#include "fused_ops/layernorm.h"

namespace hfta::cuda {
void layernorm_forward(const LayerNormParams& p, const LayerNormForwardArgs& a);
void layernorm_backward(const LayerNormParams& p, const LayerNormBackwardArgs& a);
}  // namespace hfta::cuda
