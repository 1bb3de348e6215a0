// The CUDA attention core (fused_ops/attention.h's contract), called by the dispatch in
// fused_ops/attention.cpp for device tensors. Declared here, beside the kernels, so the op's
// contract header stays backend-neutral.
#pragma once

#include "fused_ops/attention.h"

namespace hfta::cuda {
void attention_forward(const AttentionParams& p, const AttentionForwardArgs& a);
void attention_backward(const AttentionParams& p, const AttentionBackwardArgs& a);
}  // namespace hfta::cuda
