// The one parallel loop. OpenMP underneath, shared with oneDNN and OpenBLAS (both libgomp).
// Do not call oneDNN or OpenBLAS from inside f unless one single-threaded call per item is meant.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace hfta {

template <typename F>
void parallel_for(int64_t n, F&& f) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// Runs body(begin, end) over [0, n) in fixed chunks spread over the threads: for elementwise
// loops, where one chunk is enough work to pay for a thread and small n stays on the caller.
template <typename F>
void for_each_chunk(int64_t n, F&& body) {
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks <= 1) return body(int64_t{0}, n);
  parallel_for(chunks, [&](int64_t c) { body(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

inline int num_threads() { return omp_get_max_threads(); }

}  // namespace hfta
