// CPU add: memory-bound, one flat range split over the threads in chunks (B plays no role).
#include "fused_ops/add.h"

#include <cstring>

#include "core/parallel.h"

namespace hfta::cpu {

void add_forward(const AddForwardArgs& a) {
  const float* x = a.a.data;
  const float* z = a.b.data;
  float* y = a.y.data;
  for_each_chunk(a.y.numel(), [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) y[i] = x[i] + z[i];
  });
}

void add_backward(const AddBackwardArgs& a) {
  const float* dy = a.dy.data;
  float* dx = a.dx.data;
  const bool accumulate = a.accumulate_dx;
  for_each_chunk(a.dx.numel(), [&](int64_t begin, int64_t end) {
    if (!accumulate) {
      std::memcpy(dx + begin, dy + begin, sizeof(float) * static_cast<size_t>(end - begin));
      return;
    }
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) dx[i] += dy[i];
  });
}

}  // namespace hfta::cpu
