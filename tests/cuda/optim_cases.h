// The parameter tables the CUDA optimizer tests step (test_cuda_optim.cpp, test_cuda_clip.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "optim/optimizer.h"

namespace hfta::test {

struct SegmentSpec {
  int64_t per_model_numel;
  bool decay;
};

// Segments packed in order with `gap` unused floats before each, so a chunk that strays outside
// its segment lands on floats no segment owns. Checked (ParamTable::check) before it is returned.
inline ParamTable make_table(int64_t B, const std::vector<SegmentSpec>& specs, int64_t gap) {
  ParamTable table;
  table.B = B;
  int64_t offset = 0;
  for (const SegmentSpec& s : specs) {
    offset += gap;
    table.segments.push_back({offset, s.per_model_numel, s.decay});
    offset += B * s.per_model_numel;
  }
  table.total_floats = offset + gap;
  table.check();
  return table;
}

// Decay on and off, tiny segments, and one of kChunkFloats + 1 floats: two chunks per model.
inline const std::vector<SegmentSpec> kOptimizerSegments = {
    {37, true}, {5, false}, {Optimizer::kChunkFloats + 1, true}, {1, false}, {300, true}};

}  // namespace hfta::test
