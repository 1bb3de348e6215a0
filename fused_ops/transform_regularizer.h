// Fused PointNet feature-transform regularizer: each model's loss is scale times the mean over
// its samples of ||A A^T - I||_F (fxia22's feature_transform_regularizer, 0.001 in training), for
// B models in one call.
//
//   a     [B, N, k, k]   model b, sample s: the predicted k x k transform A
//   loss  [B]            loss[b] = scale / N * sum_s ||M_bs||_F,  M = A A^T - I
// Backward: with g = dloss[b] * scale / N / ||M|| (0 where M = 0, the norm's kink),
// da = 2 g M A (M is symmetric), written (=), or added (+=) with accumulate_dx.
// Arithmetic (fused_ops/cuda/transform_regularizer_math.h, shared by the CPU and CUDA kernels):
// M's entries in double from the exact products of floats, summed in order; ||M||^2 their squares
// in row-major order, each rounded before its add; the loss's sum over samples in order; backward
// keeps M rounded to float and sums float products of M and A in double. Model b's bits do not
// depend on B.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hfta {

struct TransformRegularizerParams {
  int64_t B = 1;
  int64_t N = 1;       // samples (matrices) per model
  int64_t k = 1;       // each matrix is k x k
  float scale = 1.0f;  // the regularizer's weight in the loss

  Shape a_shape() const { return {B, N, k, k}; }
  Shape loss_shape() const { return {B}; }
  // A A^T: k^3 multiply-adds per matrix.
  double forward_flops() const { return 2.0 * static_cast<double>(B * N) * k * k * k; }
};

// The tensors of one call, by name (call with designated initializers:
// transform_regularizer_forward(p, {.a = a, .loss = loss})).
struct TransformRegularizerForwardArgs {
  TensorView a{}, loss{};
};
// No saved state: backward recomputes M from a (k^3 per matrix, as the forward).
struct TransformRegularizerBackwardArgs {
  TensorView a{};
  TensorView dloss{};          // [B]
  TensorView da{};             // output; an empty view = not wanted
  bool accumulate_dx = false;  // da += gradient instead of da = gradient
};

// Throws hfta::Error when a size is not positive, the scale is not finite, a tensor does not
// match its shape above, or the tensors of one call are on different devices.
void check_transform_regularizer(const TransformRegularizerParams& p,
                                 const TransformRegularizerForwardArgs& a);
void check_transform_regularizer_backward(const TransformRegularizerParams& p,
                                          const TransformRegularizerBackwardArgs& a);

void transform_regularizer_forward(const TransformRegularizerParams& p,
                                   const TransformRegularizerForwardArgs& a);
void transform_regularizer_backward(const TransformRegularizerParams& p,
                                    const TransformRegularizerBackwardArgs& a);

namespace ref {
void transform_regularizer_forward(const TransformRegularizerParams& p,
                                   const TransformRegularizerForwardArgs& a);
void transform_regularizer_backward(const TransformRegularizerParams& p,
                                    const TransformRegularizerBackwardArgs& a);
}  // namespace ref

namespace cpu {
void transform_regularizer_forward(const TransformRegularizerParams& p,
                                   const TransformRegularizerForwardArgs& a);
void transform_regularizer_backward(const TransformRegularizerParams& p,
                                    const TransformRegularizerBackwardArgs& a);
}  // namespace cpu

// Every tensor in device memory (fused_ops/cuda/transform_regularizer.cpp; defined only in a
// build with -DHFTA_CUDA=ON): the CPU op's bits. Runs on the calling thread's stream (its device
// scratch holds M and the norms) and returns at once.
namespace cuda {
void transform_regularizer_forward(const TransformRegularizerParams& p,
                                   const TransformRegularizerForwardArgs& a);
void transform_regularizer_backward(const TransformRegularizerParams& p,
                                    const TransformRegularizerBackwardArgs& a);
}  // namespace cuda

}  // namespace hfta
