// `hfta export`: one model of an array as a safetensors file with PyTorch's state_dict names,
// shapes and layouts, so the PyTorch module of the same architecture loads it with
// load_state_dict (torchvision's resnet18 / mobilenet_v2 with the data's input channels and
// classes; benchmarks/torch_models.py builds them).
#pragma once

#include <cstdint>
#include <vector>

#include "io/safetensors.h"

namespace hfta {

class Model;
class Net;

// Replica b's parameters and persistent buffers in state_dict order and layout: Linear weights
// transposed to [out, in], BatchNorm's num_batches_tracked as an int64 scalar.
std::vector<SafeTensor> state_dict(const Model& model, int64_t b);
// The same for the parameters and buffers of any net (a language model's, a DCGAN generator's
// or discriminator's).
std::vector<SafeTensor> state_dict(const Net& net, int64_t b);

// The inverse: replica b's parameters and buffers become `tensors` (a state_dict as state_dict()
// writes it, or as PyTorch saves the same module), strictly: every parameter and buffer of the
// net must be there with its PyTorch shape, and nothing else. Checks all before writing any;
// throws hfta::Error naming the missing, unexpected or misshapen tensors. `source` names where
// the tensors came from in the error (a file).
void load_state_dict(Model& model, int64_t b, const std::vector<SafeTensor>& tensors,
                     const std::string& source);
void load_state_dict(Net& net, int64_t b, const std::vector<SafeTensor>& tensors,
                     const std::string& source);

}  // namespace hfta
