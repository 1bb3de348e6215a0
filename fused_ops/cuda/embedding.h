// The CUDA embedding (fused_ops/embedding.h's contract), called by the dispatch in
// fused_ops/embedding.cpp for device tensors. Declared here, beside the kernels, so the op's
// contract header stays backend-neutral.
#pragma once

#include "fused_ops/embedding.h"

namespace hfta::cuda {
void embedding_forward(const EmbeddingParams& p, const EmbeddingForwardArgs& a);
void embedding_backward(const EmbeddingParams& p, const EmbeddingBackwardArgs& a);
}  // namespace hfta::cuda
