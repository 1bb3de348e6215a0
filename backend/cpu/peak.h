// The machine's peak fp32 throughput, the denominator of every "% of peak" hfta prints.
#pragma once

namespace hfta::cpu {

// GFLOP/s of a 2048^3 OpenBLAS sgemm with the current thread count (set_num_threads): the median
// of at least 5 timed calls after one warm-up call, repeated for at least 300 ms. Takes about a
// second; allocates 48 MiB while it runs.
double measure_peak_gflops();

// How the timed calls become one figure: their median, or the fastest call (another process on
// the cores can only slow a call down, so the fastest is the machine's best).
enum class PeakStatistic { kMedian, kFastest };

// The same measurement with oneDNN's JIT sgemm, which always uses the CPU's widest vectors
// (OpenBLAS's kernels follow OPENBLAS_CORETYPE and may be narrower).
double measure_onednn_sgemm_gflops(PeakStatistic statistic = PeakStatistic::kMedian);

// The larger of the two: what `hfta sweep` reports percent_of_peak against.
double measure_machine_peak_gflops();

}  // namespace hfta::cpu
