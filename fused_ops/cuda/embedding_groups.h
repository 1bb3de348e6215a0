// The token rows of a shared id sequence grouped by vocabulary row, for the CUDA embedding's
// weight gradient (embedding_math.h's dweight_at): a stable counting sort on the host, where the
// ids already are (the op copies them back to check them). Plain C++, no vendor header: the op
// (fused_ops/cuda/embedding.cpp) and its host test share it.
#pragma once

#include <cstdint>
#include <vector>

namespace hfta::cuda {

// Groups in increasing id; within a group, rows in increasing order; the padding id's rows (if
// any) in no group. All three arrays go to the device as one int32 block:
// [vocab (groups), starts (groups + 1), order (rows in groups)].
struct EmbeddingGroups {
  std::vector<int32_t> vocab, starts, order;
  int64_t groups() const { return static_cast<int64_t>(vocab.size()); }
  std::vector<int32_t> packed() const {
    std::vector<int32_t> all(vocab);
    all.insert(all.end(), starts.begin(), starts.end());
    all.insert(all.end(), order.begin(), order.end());
    return all;
  }
};

// ids [R] in [0, V) (checked by the caller); padding < 0: none.
inline EmbeddingGroups group_rows(const int32_t* ids, int64_t R, int64_t V, int64_t padding) {
  std::vector<int32_t> count(static_cast<size_t>(V) + 1, 0);
  for (int64_t r = 0; r < R; ++r)
    if (ids[r] != padding) ++count[static_cast<size_t>(ids[r]) + 1];
  EmbeddingGroups g;
  std::vector<int32_t> next(static_cast<size_t>(V), -1);  // next slot of each used id
  int32_t slot = 0;
  g.starts.push_back(0);
  for (int64_t v = 0; v < V; ++v) {
    const int32_t c = count[static_cast<size_t>(v) + 1];
    if (c == 0) continue;
    g.vocab.push_back(static_cast<int32_t>(v));
    next[static_cast<size_t>(v)] = slot;
    slot += c;
    g.starts.push_back(slot);
  }
  g.order.assign(static_cast<size_t>(slot), 0);
  for (int64_t r = 0; r < R; ++r)
    if (ids[r] != padding)
      g.order[static_cast<size_t>(next[static_cast<size_t>(ids[r])]++)] = static_cast<int32_t>(r);
  return g;
}

}  // namespace hfta::cuda
