// The one parallel loop. OpenMP underneath, shared with oneDNN and OpenBLAS (both libgomp).
// Do not call oneDNN or OpenBLAS from inside f unless one single-threaded call per item is meant.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace hfta {

// With one thread to use (a plan's worker sets one; --threads 1), or one item, the loop runs on
// the caller: entering even a one-thread OpenMP region takes libgomp's team locks, and a threads
// plan's two workers calling ~300 ops a step each waited on each other there (futex calls).
template <typename F>
void parallel_for(int64_t n, F&& f) {
  if (n <= 1 || omp_get_max_threads() == 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// parallel_for for items of unequal cost: a thread that finishes one item takes the next one not
// yet taken, so a long item does not leave the other threads idle behind a static share.
template <typename F>
void parallel_for_dynamic(int64_t n, F&& f) {
  if (n <= 1 || omp_get_max_threads() == 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
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
