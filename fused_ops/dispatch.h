// Backend choice for fused ops: one `switch (device)` per op, no class hierarchy.
#pragma once

#include "core/error.h"
#include "core/tensor.h"

namespace hfta {

[[noreturn]] inline void unsupported_device(const char* op, Device device) {
  fail(
      "{} has no {} kernel in this build: configure with -DHFTA_CUDA=ON on a CUDA machine, or "
      "keep the tensors on the CPU",
      op, device == Device::kCuda ? "CUDA" : "unknown-device");
}

}  // namespace hfta

// Runs `cpu_call` for CPU tensors; CUDA tensors fail until the CUDA backend exists.
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
