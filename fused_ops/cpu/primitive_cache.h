// The bound shared by the oneDNN primitive caches of conv2d and conv_transpose2d: entries are
// keyed by, among others, the OpenMP thread that calls (`caller`, -1 outside a parallel region),
// and the capacity applies to each caller's entries alone. Plans that run whole models per
// thread (models/plan.h) call every conv shape of a network from each worker; one bound over all
// callers (32 problems) held fewer than MobileNetV2's ~20 shapes times two workers, so the
// workers evicted each other's entries every step and rebuilt them (primitives, blocked copies:
// ~1 300 page faults a step). Per caller, a worker keeps a network's shapes as one thread does.
#pragma once

#include <cstdint>
#include <iterator>

namespace hfta::cpu {

// Erases the least recently used entries whose key's caller is `caller` until at most `keep` of
// that caller's remain. Map: an associative container of Key -> shared_ptr<Entry>, with
// Key::caller and Entry::last_used (a tick that grows with every use). The caller holds the
// cache's mutex.
template <class Map>
void evict_least_recent(Map& cache, int caller, int64_t keep) {
  for (;;) {
    int64_t count = 0;
    auto oldest = cache.end();
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (it->first.caller != caller) continue;
      ++count;
      if (oldest == cache.end() || it->second->last_used < oldest->second->last_used) oldest = it;
    }
    if (count <= keep) return;
    cache.erase(oldest);
  }
}

}  // namespace hfta::cpu
