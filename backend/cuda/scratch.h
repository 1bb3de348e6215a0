// Device scratch memory for ops that need temporary buffers on the device (the conv2d's im2col
// columns): one buffer per host thread, used on that thread's stream, grown on demand and freed
// when the thread exits. Kept simple on purpose: the training step is meant not to allocate, and
// after the first step of each shape the buffer is already as large as the largest request.
//
// Two ops of one thread never use it at once (they run one after another on the thread's
// stream, so a later op's kernels overwrite it only after the earlier op's kernels have read
// it). Growing waits for the stream before freeing the old buffer.
#pragma once

#include <cstdint>

namespace hfta::cuda {

// At least `floats` floats of device memory for the calling thread's stream, valid until the
// thread's next device_scratch call. Its contents are undefined. Throws hfta::Error (naming the
// size, the device's free memory and the way out) when cudaMalloc fails.
float* device_scratch(int64_t floats);

// Bytes the calling thread's scratch holds now (0 before its first use).
int64_t device_scratch_bytes();

}  // namespace hfta::cuda
