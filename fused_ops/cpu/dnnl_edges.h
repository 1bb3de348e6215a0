// A oneDNN primitive's arguments backed by callers' plain buffers (Edge): the primitive reads and
// writes the layouts it picked (format_tag::any), the callers hold plain NCHW / [B, ...] tensors,
// and an edge moves the data between the two at the call's edges. The convolutions
// (conv2d_onednn.cpp, conv_transpose2d.cpp) build their arguments from these.
//
// Activations between plain NCHW and channel-blocked nChw16c / nChw8c move by our own transposes
// (ChannelBlocking), everything else by oneDNN reorders. oneDNN 2.6 reorders a model's channel
// slice of the fused [N, B*C, H, W] tensor (images B*C*H*W floats apart, so not dense) with its
// generic jit:uni kernel, which took about twice as long as the 16 x 16 AVX-512 transpose in
// dnnl_edges.cpp (its plain loops are in between; numbers in docs/benchmarks.md, 'Measurements
// behind code choices'). AVX2 builds, whose oneDNN kernels pick nChw8c, transpose 8 x 8 tiles the
// same way. Every conversion copies (or, into the plain tensor, adds) each element once, so the
// result does not depend on the path that moved it.
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

// One primitive argument backed by a caller's buffer: `user` wraps the buffer (handle set per
// call), `inner` is what the primitive reads or writes (the same memory when the layouts agree).
struct Edge {
  dnnl::memory user, inner;
  dnnl::reorder to_inner;  // input edges: user -> inner (unless blocking.blk)
  dnnl::reorder write;     // output edges: inner -> user, = (unless blocking.blk)
  dnnl::reorder add;       // output edges: user += inner
  bool separate = false;
  ChannelBlocking blocking;  // blk != 0: our own plain <-> blocked conversion replaces the reorders

  void set(float* data) const { user.set_data_handle(data); }
  float* user_data() const { return static_cast<float*>(user.get_data_handle()); }
  float* inner_data() const { return static_cast<float*>(inner.get_data_handle()); }
};

// An argument the primitive reads, in layout `want`. `pool`: one buffer for the blocked copies of
// x-like (or y-like) tensors of a cache entry, whose parts run one at a time and refill it before
// each use (an x-like and a y-like copy are never the same buffer: one primitive may read one and
// write the other); a copy in another layout, or with no pool, gets a buffer of its own.
Edge input_edge(const dnnl::memory::desc& user_md, const dnnl::memory::desc& want,
                dnnl::memory* pool = nullptr);

// An argument the primitive writes, in layout `got`. can_write: the result may be written (=) to
// the user buffer; can_add: it may be added (+=), which needs a separate scratch `inner` even when
// the layouts agree. `pool` as for input_edge.
Edge output_edge(const dnnl::memory::desc& user_md, const dnnl::memory::desc& got, bool can_write,
                 bool can_add, dnnl::memory* pool = nullptr);

// Brings an input edge's data in, skipping repeats of a buffer shared by every run (step 0) after
// the lane's first run (`first`), unless the copy was overwritten since (`stale`).
void bring_in(dnnl::stream& stream, const Edge& e, bool first = true, int64_t step = 0,
              bool stale = false);
// Writes an output edge's result to the caller's buffer (=).
void write_out(dnnl::stream& stream, const Edge& e);
// Adds an output edge's result to the caller's buffer (+=); the edge was built with can_add.
void add_out(dnnl::stream& stream, const Edge& e);
// add_out when `add` (accumulating into the caller's buffer), else write_out.
void store_out(dnnl::stream& stream, const Edge& e, bool add);

}  // namespace hfta::cpu
