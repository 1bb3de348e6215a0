// Plain NCHW <-> channel-blocked nChw16c / nChw8c: the conversions conv2d.cpp runs on the
// activations around every oneDNN convolution.
//
// oneDNN 2.6 reorders a model's channel slice of the fused [N, B*C, H, W] tensor (images B*C*H*W
// floats apart, so not dense) with its generic jit:uni kernel, which took about twice as long as
// the 16 x 16 AVX-512 transpose in channel_blocks.cpp (its plain loops are in between; numbers in
// docs/benchmarks.md, 'Measurements behind code choices'). AVX2 builds, whose oneDNN kernels pick
// nChw8c, transpose 8 x 8 tiles the same way. Every conversion copies (or, into the plain
// tensor, adds) each element once, so the result does not depend on the path that moved it.
#pragma once

#include <cstdint>

#include "backend/cpu/dnnl_context.h"

namespace hfta::cpu {

//   plain    [N, C, HW] with images `ld` floats apart (ld = C*HW when dense)
//   blocked  [N, C/blk, HW, blk], dense; C % blk == 0
struct ChannelBlocking {
  int64_t N = 0, C = 0, HW = 0, ld = 0, blk = 0;
};

// How convert_channel_blocks moves the data: plain -> blocked, or blocked -> plain written (=)
// or added (+=, an accumulating input gradient).
enum class Conversion { kToBlocked, kToPlain, kAddToPlain };

// Every (image, channel block) of `b`, spread over the threads.
void convert_channel_blocks(const ChannelBlocking& b, float* plain, float* blocked, Conversion how);

// When `user` is a plain [N, C, H, W] (channel slice) and `inner` a dense nChw16c / nChw8c
// tensor of the same size: the geometry for convert_channel_blocks; otherwise blk = 0.
ChannelBlocking channel_blocking(const dnnl::memory::desc& user, const dnnl::memory::desc& inner);

}  // namespace hfta::cpu
