// Backend choice for fused ops: one `switch (device)` per op, no class hierarchy.
//
// HFTA_WITH_CUDA (defined for hfta's users by a -DHFTA_CUDA=ON build) turns on the CUDA cases of
// ops that have a CUDA kernel (HFTA_DISPATCH_CUDA); without it, and for ops without one
// (HFTA_DISPATCH), CUDA tensors raise hfta::Error.
#pragma once

#include <string_view>

#include "core/device_memory.h"
#include "core/error.h"
#include "core/tensor.h"

namespace hfta {

[[noreturn]] inline void unsupported_device(const char* op, Device device) {
  if (device != Device::kCuda) fail("{} got tensors on an unknown device", op);
#if HFTA_WITH_CUDA
  fail(
      "{} has no CUDA kernel yet (docs/cuda.md lists the ones that exist): keep its tensors on "
      "the CPU",
      op);
#else
  fail(
      "{} got CUDA tensors, but this build has no CUDA backend: configure with -DHFTA_CUDA=ON on "
      "a machine with /usr/local/cuda, or keep the tensors on the CPU",
      op);
#endif
}

inline const char* device_name(Device device) {
  return device == Device::kCuda ? "CUDA device" : "CPU";
}

// Throws hfta::Error when `t` (named `name`) is not on `device`, the device the op runs on (that
// of the tensor its dispatch switches on). An empty view (not wanted) is on every device.
template <typename T>
void check_device(const View<T>& t, Device device, std::string_view name) {
  HFTA_CHECK(t.empty() || t.device == device,
             "{} is on the {}, but the op runs on the {}: put every tensor of one call on one "
             "device",
             name, device_name(t.device), device_name(device));
}

// For a kernel that only adds parameter gradients (+=): the call's arguments with dweight and
// dbias zeroed first when the call asked for them written (accumulate_dparams = false), so that
// adding gives what writing would.
template <typename BackwardArgs>
BackwardArgs with_param_grads_zeroed(BackwardArgs a) {
  if (a.accumulate_dparams) return a;
  zero_view(a.dweight);
  zero_view(a.dbias);
  a.accumulate_dparams = true;
  return a;
}

}  // namespace hfta

// Runs `cpu_call` for CPU tensors; CUDA tensors raise (the op has no CUDA kernel).
#define HFTA_DISPATCH(op_name, device, cpu_call)     \
  do {                                               \
    switch (device) {                                \
      case ::hfta::Device::kCpu:                     \
        cpu_call;                                    \
        break;                                       \
      default:                                       \
        ::hfta::unsupported_device(op_name, device); \
    }                                                \
  } while (0)

// Runs `cpu_call` for CPU tensors and `cuda_call` for CUDA tensors; a build without the CUDA
// backend never compiles `cuda_call` and raises for CUDA tensors.
#if HFTA_WITH_CUDA
#define HFTA_DISPATCH_CUDA(op_name, device, cpu_call, cuda_call) \
  do {                                                           \
    switch (device) {                                            \
      case ::hfta::Device::kCpu:                                 \
        cpu_call;                                                \
        break;                                                   \
      case ::hfta::Device::kCuda:                                \
        cuda_call;                                               \
        break;                                                   \
      default:                                                   \
        ::hfta::unsupported_device(op_name, device);             \
    }                                                            \
  } while (0)
#else
#define HFTA_DISPATCH_CUDA(op_name, device, cpu_call, cuda_call) \
  HFTA_DISPATCH(op_name, device, cpu_call)
#endif
