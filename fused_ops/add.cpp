#include "fused_ops/add.h"

#include "fused_ops/dispatch.h"

namespace hfta {

void check_add(const AddForwardArgs& a) {
  HFTA_CHECK(a.a.data != nullptr, "add: the first operand is missing");
  check_shape(a.b, a.a.shape, "add second operand");
  check_shape(a.y, a.a.shape, "add output");
  check_device(a.b, a.a.device, "add second operand");
  check_device(a.y, a.a.device, "add output");
}

void check_add_backward(const AddBackwardArgs& a) {
  HFTA_CHECK(a.dy.data != nullptr, "add: the output gradient is missing");
  check_shape(a.dx, a.dy.shape, "add operand gradient");
  check_device(a.dx, a.dy.device, "add operand gradient");
}

void add_forward(const AddForwardArgs& a) {
  check_add(a);
  HFTA_DISPATCH_CUDA("add_forward", a.a.device, cpu::add_forward(a), cuda::add_forward(a));
}

void add_backward(const AddBackwardArgs& a) {
  check_add_backward(a);
  HFTA_DISPATCH_CUDA("add_backward", a.dy.device, cpu::add_backward(a), cuda::add_backward(a));
}

}  // namespace hfta
