// Valid small files that the hostile-bytes replay (tests/io/test_hostile_bytes.cpp) and the
// fuzz targets' seed corpora (fuzz/make_seeds.cpp) start from, written by the project's writers.
#pragma once

#include <vector>

#include "io/checkpoint.h"

namespace hfta {

// A small array checkpoint; `everything` fills the optional parts (data, plan, language model,
// optimizer state).
inline Checkpoint seed_checkpoint(bool everything) {
  Checkpoint c;
  c.model = "mlp";
  c.sample_shape = {1, 4, 4};
  c.num_classes = 3;
  c.B = 2;
  c.seed = 9;
  c.batch_size = 8;
  c.model_ids = {0, 1};
  c.optimizer = "adam";
  c.hyper = {{"lr", {0.1, 0.2}}, {"beta1", {0.9, 0.8}}};
  c.epoch = 1;
  c.batch_in_epoch = 3;
  c.step = 7;
  c.epoch_loss_sum = {1.5, 2.5};
  c.last_train_loss = {0.5, 0.7};
  c.optimizer_steps = {7, 6};
  c.skipped_steps = {0, 1};
  c.tensors = {{"0.weight", Shape{2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
               {"0.bias", Shape{2, 3}, {-1, -2, -3, -4, -5, -6}}};
  if (everything) {
    c.dataset = "synthetic";
    c.data_dir = "/data/x";
    c.synthetic_test_size = 16;
    c.plan = "threads:1/8";
    c.forward_origins = {0, 5};
    c.lm = LmCheckpointInfo{.vocab = 11,
                            .vocab_hash = 0xfeedbeefcafeull,
                            .emsize = 4,
                            .nhid = 8,
                            .nlayers = 2,
                            .nhead = 2,
                            .bptt = 5,
                            .dropout = 0.2,
                            .dataset = "text",
                            .text_files = "a.txt",
                            .data_dir = "/d",
                            .corpus = "tiny"};
    c.tensors.push_back({"0.weight#state0", Shape{2, 2, 3}, std::vector<float>(12, 0.25f)});
  }
  return c;
}

}  // namespace hfta
