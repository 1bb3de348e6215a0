#include "optim/slots.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "core/error.h"

namespace hfta {

namespace {
// Every field of SlotHyper by name; switches are set from a value != 0.
struct Field {
  const char* name;
  std::optional<float> SlotHyper::*value;
  std::optional<bool> SlotHyper::*flag;
};
const std::vector<Field>& fields() {
  static const std::vector<Field> list = {
      {"lr", &SlotHyper::lr, nullptr},
      {"beta1", &SlotHyper::beta1, nullptr},
      {"beta2", &SlotHyper::beta2, nullptr},
      {"eps", &SlotHyper::eps, nullptr},
      {"weight_decay", &SlotHyper::weight_decay, nullptr},
      {"momentum", &SlotHyper::momentum, nullptr},
      {"dampening", &SlotHyper::dampening, nullptr},
      {"alpha", &SlotHyper::alpha, nullptr},
      {"rho", &SlotHyper::rho, nullptr},
      {"nesterov", nullptr, &SlotHyper::nesterov},
      {"centered", nullptr, &SlotHyper::centered},
  };
  return list;
}
}  // namespace

SlotHyper SlotHyper::from_named(const std::map<std::string, float>& values) {
  SlotHyper h;
  for (const auto& [name, value] : values) {
    const Field* f = nullptr;
    for (const Field& candidate : fields())
      if (name == candidate.name) f = &candidate;
    if (f == nullptr) {
      std::vector<std::string> known;
      for (const Field& candidate : fields()) known.emplace_back(candidate.name);
      fail("unknown optimizer hyperparameter '{}' for a slot: choose from {}", name,
           fmt::join(known, ", "));
    }
    if (f->value != nullptr)
      h.*(f->value) = value;
    else
      h.*(f->flag) = value != 0.0f;
  }
  return h;
}

std::string SlotHyper::names_set() const {
  std::vector<std::string> set;
  for (const Field& f : fields())
    if (f.value != nullptr ? (this->*(f.value)).has_value() : (this->*(f.flag)).has_value())
      set.emplace_back(f.name);
  return fmt::format("{}", fmt::join(set, ", "));
}

void SlotHyper::check_only(std::string_view optimizer,
                           std::initializer_list<std::string_view> reads) const {
  for (const Field& f : fields()) {
    const bool set =
        f.value != nullptr ? (this->*(f.value)).has_value() : (this->*(f.flag)).has_value();
    bool read = false;
    for (std::string_view r : reads) read = read || r == f.name;
    HFTA_CHECK(!set || read,
               "{} has no hyperparameter {}: a refilled slot of a {} array takes only {}",
               optimizer, f.name, optimizer, fmt::join(reads, ", "));
  }
}

void check_keep(std::span<const int64_t> keep, int64_t B, std::string_view what) {
  HFTA_CHECK(!keep.empty(),
             "{}: compacting to no models: keep at least one slot (or drop the whole array)", what);
  HFTA_CHECK(static_cast<int64_t>(keep.size()) <= B,
             "{}: keeping {} slots of an array of {}: list each kept slot once", what, keep.size(),
             B);
  std::vector<uint8_t> seen(static_cast<size_t>(B), 0);
  for (int64_t b : keep) {
    HFTA_CHECK(b >= 0 && b < B, "{}: cannot keep slot {}: the array has slots 0..{}", what, b,
               B - 1);
    HFTA_CHECK(!seen[static_cast<size_t>(b)],
               "{}: slot {} is kept twice: list each kept slot once ({})", what, b,
               fmt::join(keep, ","));
    seen[static_cast<size_t>(b)] = 1;
  }
}

}  // namespace hfta
