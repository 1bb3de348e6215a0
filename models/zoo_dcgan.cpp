// PyTorch's examples/dcgan Generator and Discriminator, written as functions over a Net.
// Module indices follow the example's nn.Sequential, so state_dict names match it exactly.
#include <string>

#include "core/error.h"
#include "models/gan.h"

namespace hfta {

namespace {

// The example's weights_init: conv weights N(0, 0.02), BatchNorm weight N(1, 0.02), bias 0.
constexpr float kInitStd = 0.02f;

// BatchNorm2d with the example's N(1, 0.02) scale (batchnorm2d() records constant 1).
Value dcgan_batchnorm(Net& n, Value x, const std::string& name) {
  Value y = n.batchnorm2d(x, name);
  n.set_init(n.scoped(name + ".weight"), Init::normal(kInitStd, 1.0f));
  return y;
}

// Up-/down-sampling stages between the 4x4 core and the image: 64 -> 3, 32 -> 2, 16 -> 1, 8 -> 0.
int64_t stages(const DcganArch& a) {
  int64_t s = 0;
  for (int64_t side = 8; side < a.image; side *= 2) ++s;
  return s;
}

}  // namespace

void DcganArch::check() const {
  HFTA_CHECK(nz >= 1 && ngf >= 1 && ndf >= 1 && nc >= 1,
             "DCGAN sizes must be positive (nz {}, ngf {}, ndf {}, nc {})", nz, ngf, ndf, nc);
  HFTA_CHECK(image == 8 || image == 16 || image == 32 || image == 64,
             "DCGAN image size {} is not supported: use 64 (the example's), 32, 16 or 8 "
             "(--image-size; 28x28 datasets are resized)",
             image);
}

uint64_t dcgan_seed(uint64_t seed, DcganNet which) {
  return which == DcganNet::kGenerator ? seed : seed ^ 0x9E3779B97F4A7C15ull;
}

Value dcgan_generator(Net& n, Value z, const DcganArch& a) {
  a.check();
  const Init w = Init::normal(kInitStd);
  auto sc = n.scope("main");
  const int64_t s = stages(a);
  int idx = 0;
  auto name = [&](int i) { return std::to_string(i); };
  // nz -> ngf * 2^s at 4x4, then s doublings of the side halving the channels, then -> nc.
  int64_t ch = a.ngf << s;
  Value h = n.conv_transpose2d(
      z, name(idx++),
      {.out_channels = ch, .kernel = 4, .stride = 1, .pad = 0, .bias = false, .weight_init = w});
  h = n.relu(dcgan_batchnorm(n, h, name(idx++)));
  ++idx;
  for (int64_t i = 0; i < s; ++i) {
    ch /= 2;
    h = n.conv_transpose2d(
        h, name(idx++),
        {.out_channels = ch, .kernel = 4, .stride = 2, .pad = 1, .bias = false, .weight_init = w});
    h = n.relu(dcgan_batchnorm(n, h, name(idx++)));
    ++idx;
  }
  h = n.conv_transpose2d(
      h, name(idx++),
      {.out_channels = a.nc, .kernel = 4, .stride = 2, .pad = 1, .bias = false, .weight_init = w});
  return n.tanh(h);
}

Value dcgan_discriminator(Net& n, Value x, const DcganArch& a) {
  a.check();
  const Init w = Init::normal(kInitStd);
  auto sc = n.scope("main");
  const int64_t s = stages(a);
  int idx = 0;
  auto name = [&](int i) { return std::to_string(i); };
  int64_t ch = a.ndf;
  Value h = n.conv2d(
      x, name(idx++),
      {.out_channels = ch, .kernel = 4, .stride = 2, .pad = 1, .bias = false, .weight_init = w});
  h = n.leaky_relu(h, 0.2f);
  ++idx;
  for (int64_t i = 0; i < s; ++i) {
    ch *= 2;
    h = n.conv2d(
        h, name(idx++),
        {.out_channels = ch, .kernel = 4, .stride = 2, .pad = 1, .bias = false, .weight_init = w});
    h = n.leaky_relu(dcgan_batchnorm(n, h, name(idx++)), 0.2f);
    ++idx;
  }
  h = n.conv2d(
      h, name(idx++),
      {.out_channels = 1, .kernel = 4, .stride = 1, .pad = 0, .bias = false, .weight_init = w});
  return n.flatten(h);
}

}  // namespace hfta
