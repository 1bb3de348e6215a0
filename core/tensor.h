// Non-owning tensor views. Arenas own memory; a View is a pointer, a shape and a device.
//
// Conventions used across the project:
//   B  models in the array, b one model's index     N  minibatch rows per model
//   C, H, W  channels, height, width                 F  features
// Parameters are replica-major: every parameter tensor is [B, ...].
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/error.h"

namespace hfta {

enum class Device { kCpu, kCuda };

inline constexpr int kMaxRank = 6;

// A dense row-major shape of at most kMaxRank dimensions.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    HFTA_CHECK(dims.size() <= kMaxRank, "shape has {} dimensions, at most {} are supported",
               dims.size(), kMaxRank);
    for (int64_t d : dims) dims_[rank_++] = d;
  }
  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  // Product of dimensions [from, rank).
  int64_t numel_from(int from) const {
    int64_t n = 1;
    for (int i = from; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  void push_back(int64_t d) {
    HFTA_CHECK(rank_ < kMaxRank, "shape {} cannot grow past {} dimensions", str(), kMaxRank);
    dims_[rank_++] = d;
  }
  // The shape without its leading dimension: [B, ...] -> [...].
  Shape drop_front() const {
    Shape out;
    for (int i = 1; i < rank_; ++i) out.push_back(dims_[i]);
    return out;
  }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  bool operator==(const Shape& other) const {
    if (rank_ != other.rank_) return false;
    for (int i = 0; i < rank_; ++i)
      if (dims_[i] != other.dims_[i]) return false;
    return true;
  }
  std::string str() const { return fmt::format("[{}]", fmt::join(begin(), end(), ", ")); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

template <typename T>
struct View {
  T* data = nullptr;
  Shape shape;
  Device device = Device::kCpu;

  View() = default;
  View(T* data_, Shape shape_, Device device_ = Device::kCpu)
      : data(data_), shape(shape_), device(device_) {}
  bool empty() const { return data == nullptr; }
  int64_t numel() const { return shape.numel(); }
  T& operator[](int64_t i) const { return data[i]; }
  // Model b's slice of a replica-major [B, ...] tensor.
  View<T> replica(int64_t b) const {
    return View<T>(data + b * shape.numel_from(1), shape.drop_front(), device);
  }
  // The first new_shape.numel() elements as a tensor of that shape, on the same device: a
  // buffer sized for the most rows, read for fewer.
  View<T> leading(Shape new_shape) const {
    HFTA_CHECK(new_shape.numel() <= shape.numel(),
               "a view of shape {} ({} elements) cannot hold {} ({})", shape.str(), shape.numel(),
               new_shape.str(), new_shape.numel());
    return View<T>(data, new_shape, device);
  }
  View<T> reshaped(Shape new_shape) const {
    HFTA_CHECK(new_shape.numel() == shape.numel(), "cannot reshape {} ({} elements) to {} ({})",
               shape.str(), shape.numel(), new_shape.str(), new_shape.numel());
    return View<T>(data, new_shape, device);
  }
};

using TensorView = View<float>;
using IndexView = View<int32_t>;

// Throws hfta::Error naming the tensor when its shape is not the expected one.
template <typename T>
void check_shape(const View<T>& t, const Shape& expected, std::string_view name) {
  HFTA_CHECK(t.data != nullptr, "{} is missing: expected a tensor of shape {}", name,
             expected.str());
  HFTA_CHECK(t.shape == expected, "{} has shape {}, expected {}", name, t.shape.str(),
             expected.str());
}

// Same, for a tensor that may be omitted (empty view means "not wanted").
template <typename T>
void check_optional_shape(const View<T>& t, const Shape& expected, std::string_view name) {
  if (!t.empty()) check_shape(t, expected, name);
}

}  // namespace hfta
