// conv2d's oneDNN strategies (Conv2dStrategy::kGrouped and kPerModel), for fused_ops/cpu/conv2d.cpp
// to dispatch to when none of our own kernels takes a problem. The primitives are cached per
// problem (conv2d_onednn.cpp says how); the cache's controls are fused_ops/conv2d.h's.
#pragma once

#include "fused_ops/conv2d.h"

namespace hfta::cpu {

void conv2d_onednn_forward(const Conv2dParams& p, const Conv2dForwardArgs& a);
// dx is written, or added to with accumulate_dx; dweight and dbias are written, or added to with
// accumulate_dparams, as Conv2dBackwardArgs says.
void conv2d_onednn_backward(const Conv2dParams& p, const Conv2dBackwardArgs& a);
// Whether p runs as B single-model convolutions (per model) rather than one grouped one.
bool conv2d_onednn_runs_per_model(const Conv2dParams& p);

}  // namespace hfta::cpu
