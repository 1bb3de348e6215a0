// Slots of a live array: a hyperparameter search (hfta tune) stops some models of an array and
// either refills their slots with new configurations or compacts the array to the models that go
// on. Both keep the array's promise (models/model.h, Equivalence): every slot computes exactly
// what its model would compute alone.
//
//   refill   model.reinit_slot(b, id): slot b's parameters and buffers become a fresh model
//            `id`'s (its init stream, RngStream::for_model(seed, id, kRngInit)), its dropout
//            draws restart as a fresh model's (Net::forward_origins()); and
//            optimizer.reset_slot(b, hyper): its optimizer state, step and skip counts zeroed,
//            its hyperparameters replaced, so an LR schedule restarts for it at t = 0.
//   compact  compact(model, keep) and optimizer.compact(table_of(compacted), keep): an array of
//            keep.size() models whose slot i is slot keep[i] bit for bit (parameters, gradients,
//            buffers, model ids, dropout counts, optimizer state, step counts), its plan laid out
//            again for the new B.
// Neither touches another slot: every op and the optimizer compute each model on its own, so the
// other models' numbers are the same bits as without the change (tests/models/test_slots.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "models/language_model.h"
#include "models/masked_lm.h"
#include "models/model.h"
#include "optim/optimizer.h"

namespace hfta {

// The array of m's slots keep[0], keep[1], ... (distinct, in any order; throws hfta::Error for an
// empty list, a slot out of range or a repeated one). Builds a new model (its arenas sized for
// keep.size() models) and copies the kept slots' state into it; m is unchanged.
std::unique_ptr<Model> compact(const Model& m, std::span<const int64_t> keep);
std::unique_ptr<LanguageModel> compact(const LanguageModel& m, std::span<const int64_t> keep);
std::unique_ptr<MaskedLm> compact(const MaskedLm& m, std::span<const int64_t> keep);

// The optimizer of a compacted array: opt.compact() over the parameters of `compacted` (the
// net of compact(m, keep), e.g. compacted_model->net()), with opt's weight decay flags.
std::unique_ptr<Optimizer> compact_optimizer(const Optimizer& opt, const Net& compacted,
                                             std::span<const int64_t> keep);

}  // namespace hfta
