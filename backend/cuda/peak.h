// The device's fp32 peak, the denominator of "% of peak" for device runs.
#pragma once

namespace hfta::cuda {

// GFLOP/s of a 4096^3 cuBLAS sgemm (plain fp32) on the calling thread's stream: the median of 5
// timed calls after a warm-up. Takes well under a second on a current GPU; allocates 192 MiB of
// device memory while it runs. Throws hfta::Error without a device.
double measure_sgemm_peak_gflops();

}  // namespace hfta::cuda
