// What a Net knows of each value it records (models/net.h): shared by the files of Net's
// implementation, net.cpp (recording, forward, backward), net_finalize.cpp (memory planning,
// binding, initialization) and slots.cpp (re-initializing one model).
#pragma once

#include <cstdint>
#include <vector>

#include "models/net.h"

namespace hfta {

struct Net::ValueInfo {
  Shape features;
  Layout layout = Layout::kRows;
  bool shared = false;
  bool integer = false;
  int producer = -1;       // node index; -1 for inputs
  int last_consumer = -1;  // node index of the last node reading it
  int consumers = 0;       // nodes reading it
  int32_t storage = -1;    // in place (Net::finalize): the value whose buffer it shares, or -1
  float* data = nullptr;   // capacity rows (inputs: the caller's batch)
  int32_t* index_data = nullptr;
  float* grad_data = nullptr;    // null: no gradient flows into this value
  int64_t grad_offset = -1;      // bytes into the activation-gradient arena, when it has one
  int64_t input_rows = 0;        // inputs: rows of the batch set
  bool per_model_input = false;  // model_input(): data is the caller's, in the per-model layout
  bool input_needs_grad = false;
  bool grad_written = false;  // during backward: some consumer wrote the gradient
};

struct Net::HostState {
  Arena params, buffers;  // host copies of a device net's arenas; counting arenas for a host net
  std::vector<TensorView> param_values, buffer_values;
};

}  // namespace hfta
