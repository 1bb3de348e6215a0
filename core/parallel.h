// The one parallel loop. OpenMP underneath, shared with oneDNN and OpenBLAS (both libgomp).
// Do not call oneDNN or OpenBLAS from inside f unless one single-threaded call per item is meant.
#pragma once

#include <omp.h>

#include <cstdint>

namespace hfta {

template <typename F>
void parallel_for(int64_t n, F&& f) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

inline int num_threads() { return omp_get_max_threads(); }

}  // namespace hfta
