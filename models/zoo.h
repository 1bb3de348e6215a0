// Constructors of the models hfta ships; make_model() in model.h picks one by name.
#pragma once

#include <memory>

#include "models/model.h"

namespace hfta {

std::unique_ptr<Model> make_mlp(const ModelSpec& spec);
std::unique_ptr<Model> make_lenet(const ModelSpec& spec);

}  // namespace hfta
