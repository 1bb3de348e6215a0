// Per-model gradient clipping over a fused gradient arena: model b's gradients are clipped by
// model b's own global norm, as torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) does
// for that model alone:
//   norm_b = sqrt(sum of g^2 over every element of model b's slices of every gradient tensor)
//   coef_b = max_norm_b / (norm_b + 1e-6); when coef_b < 1 every gradient of model b is scaled by
//   it.
// The grads are [B, ...] tensors (model b's slice contiguous in each). A NaN or Inf norm leaves
// the model's gradients as they are (the optimizer then skips that model).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "core/tensor.h"

namespace hfta {

// Throws hfta::Error unless max_norm holds 1 or B positive finite values and norms holds B
// entries or none (every clipping of B models checks these, on either device). Inline: the CUDA
// library (optim/cuda/fused_step.cpp) calls it without linking this one.
inline void check_clip_limits(std::span<const float> max_norm, int64_t B,
                              std::span<const float> norms) {
  HFTA_CHECK(B >= 1, "gradient clipping needs at least one model, got B = {}", B);
  HFTA_CHECK(max_norm.size() == 1 || static_cast<int64_t>(max_norm.size()) == B,
             "--clip has {} values for {} models: give one (shared) or one per model",
             max_norm.size(), B);
  for (float m : max_norm)
    HFTA_CHECK(std::isfinite(m) && m > 0.0f, "--clip must be positive, got {}", m);
  HFTA_CHECK(norms.empty() || static_cast<int64_t>(norms.size()) == B,
             "gradient clipping: {} norm slots for {} models", norms.size(), B);
}

// Writes model b's norm before clipping to norms[b] (B entries, or empty). max_norm holds B
// values (one per model) or 1 (shared); throws hfta::Error for another count, a non-positive or
// non-finite max_norm, or a gradient that is not [B, ...].
void clip_grad_norm_per_model(std::span<const TensorView> grads, int64_t B,
                              std::span<const float> max_norm, std::span<float> norms = {});
// The same for models [first, first + count) only (the others' gradients are not read), as an
// execution plan's worker clips its group right after the group's backward; each model is
// clipped exactly as by clip_grad_norm_per_model. norms: B entries or empty.
void clip_grad_norm_models(std::span<const TensorView> grads, int64_t B,
                           std::span<const float> max_norm, int64_t first, int64_t count,
                           std::span<float> norms = {});

}  // namespace hfta
