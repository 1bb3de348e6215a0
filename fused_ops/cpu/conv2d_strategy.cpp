// The conv2d strategies' names (fused_ops/conv2d.h): HFTA_CONV_STRATEGY, op_bench's strategy=.
#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "fused_ops/conv2d.h"

namespace hfta::cpu {

namespace {
constexpr std::pair<Conv2dStrategy, std::string_view> kStrategyNames[] = {
    {Conv2dStrategy::kAuto, "auto"},           {Conv2dStrategy::kGrouped, "grouped"},
    {Conv2dStrategy::kPerModel, "per_model"},  {Conv2dStrategy::kDirect, "direct"},
    {Conv2dStrategy::kDepthwise, "depthwise"}, {Conv2dStrategy::kIm2col, "im2col"},
    {Conv2dStrategy::kPointwise, "pointwise"}};

}  // namespace

std::string_view conv2d_strategy_name(Conv2dStrategy strategy) {
  for (const auto& [s, name] : kStrategyNames)
    if (s == strategy) return name;
  return "unknown";
}

Conv2dStrategy parse_conv2d_strategy(std::string_view name) {
  std::string known;
  for (const auto& [s, n] : kStrategyNames) {
    if (n == name) return s;
    if (!known.empty()) known.push_back('|');
    known.append(n);
  }
  throw Error(fmt::format("conv2d strategy '{}' is not known: use one of {}", name, known));
}

}  // namespace hfta::cpu
