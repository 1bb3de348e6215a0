// Checks and helpers shared by the files that define the ops a Net records (models/ops*.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "models/net.h"

namespace hfta::op_checks {

// An op's parameters, recorded for the net's capacity, for the n rows of this forward.
template <typename Params>
Params with_rows(Params p, int64_t n) {
  p.N = n;
  return p;
}

// The per-model features of a conv-family input: [C, H, W].
inline void expect_image(const Net& net, Value x, const std::string& op) {
  HFTA_CHECK(net.features(x).rank() == 3,
             "{} needs [C, H, W] features, got {}: it follows a conv-family op", op,
             net.features(x).str());
  HFTA_CHECK(net.layout(x) == Layout::kChannels, "{} needs the channel layout", op);
}

inline void expect_not_shared(const Net& net, Value x, const std::string& op) {
  HFTA_CHECK(!net.shared(x),
             "{} cannot read the minibatch directly: it has no parameters, so the B models "
             "would compute the same thing; start the model with a Linear or Conv2d",
             op);
}

}  // namespace hfta::op_checks
