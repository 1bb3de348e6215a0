// Slots of a live array (models/slots.h has the models' side): what a refilled slot's optimizer
// takes, and the check of a compaction's list of kept slots.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hfta {

// One model's hyperparameters for a refilled slot (Optimizer::reset_slot). A value left empty
// keeps the slot's current one. Names are the optimizers' hyper fields and run/hyper.h's
// rows; giving one the optimizer does not read is an error (a search space that names beta1 for
// SGD is wrong, not ignorable).
struct SlotHyper {
  std::optional<float> lr, beta1, beta2, eps, weight_decay, momentum, dampening, alpha, rho;
  std::optional<bool> nesterov, centered;

  // From name -> value ("lr" -> 0.01, "nesterov" -> 1); throws hfta::Error naming an unknown
  // name and the known ones.
  static SlotHyper from_named(const std::map<std::string, float>& values);
  // The names that are set, e.g. "lr, beta1" (for error messages).
  std::string names_set() const;
  // Throws hfta::Error when a field outside `reads` is set: "SGD has no beta1: ...".
  void check_only(std::string_view optimizer, std::initializer_list<std::string_view> reads) const;
};

// Sets v[b] to x when x is given (the optimizers' set_slot_hyper).
template <typename T, typename X>
void set_slot_value(std::vector<T>& v, int64_t b, const std::optional<X>& x) {
  if (x) v[static_cast<size_t>(b)] = static_cast<T>(*x);
}

// Throws hfta::Error unless `keep` lists 1 to B distinct slots in [0, B) of an array of B;
// `what` names the array ("mlp", "Adam").
void check_keep(std::span<const int64_t> keep, int64_t B, std::string_view what);

}  // namespace hfta
