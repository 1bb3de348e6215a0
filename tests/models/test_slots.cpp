// Slots of a live array (models/slots.h), the fast cases: mlp, an MLP with dropout and lenet
// (tests/models/slots_harness.h says what is checked), bad input, and the language model.
// test_slots_slow.cpp has lenet at B = 5 and resnet18 (BatchNorm buffers).
#include "slots_harness.h"

namespace hfta {
namespace {

std::vector<SlotCase> slot_cases() {
  std::vector<SlotCase> cases;
  for (const char* model : {"mlp", "mlp_dropout"})
    for (int64_t B : {2, 3, 5})
      for (const char* plan : {"fused", "chunk:2", "threads"}) cases.push_back({model, B, plan});
  for (int64_t B : {2, 3})
    for (const char* plan : {"fused", "chunk:2", "threads"}) cases.push_back({"lenet", B, plan});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Arrays, Slots, testing::ValuesIn(slot_cases()), case_name);

TEST(SlotErrors, BadSlotsAndKeepListsAreClearErrors) {
  auto m = make_model("mlp", {.B = 3, .batch_size = 4, .seed = 1});
  const std::vector<float> before = m->extract(1);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { m->reinit_slot(3, 9); }),
            "mlp: cannot refill slot 3: the array has slots 0..2");
  EXPECT_EQ(message([&] { m->reinit_slot(-1, 9); }),
            "mlp: cannot refill slot -1: the array has slots 0..2");
  EXPECT_EQ(message([&] { compact(*m, std::vector<int64_t>{}); }),
            "mlp: compacting to no models: keep at least one slot (or drop the whole array)");
  EXPECT_EQ(message([&] {
              compact(*m, std::vector<int64_t>{0, 2, 0});
            }),
            "mlp: slot 0 is kept twice: list each kept slot once (0,2,0)");
  EXPECT_EQ(message([&] {
              compact(*m, std::vector<int64_t>{0, 3});
            }),
            "mlp: cannot keep slot 3: the array has slots 0..2");
  EXPECT_EQ(message([&] {
              compact(*m, std::vector<int64_t>{0, 1, 2, 0});
            }),
            "mlp: keeping 4 slots of an array of 3: list each kept slot once");
  EXPECT_EQ(m->extract(1), before);
  EXPECT_EQ(m->spec().model_ids, (std::vector<int64_t>{0, 1, 2}));
}

// The language model: a refilled slot computes as that slot of a fresh array (losses and every
// gradient bitwise, full and shorter windows, with dropout), the others as without the refill;
// a compacted array as the kept slots.
TEST(LanguageModelSlots, RefillAndCompact) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const LmConfig config{
      .vocab = 23, .emsize = 8, .nhid = 16, .nlayers = 1, .nhead = 2, .bptt = 6, .dropout = 0.2f};
  const int64_t B = 3, S = 4;
  auto lm = [&](std::vector<int64_t> ids) {
    return make_language_model("transformer", {.B = static_cast<int64_t>(ids.size()),
                                               .streams = S,
                                               .seed = seed,
                                               .model_ids = std::move(ids),
                                               .config = config});
  };
  RngStream rng(seed, 7);
  auto window = [&](int64_t T) {
    std::vector<int32_t> v(static_cast<size_t>(S * T));
    for (int32_t& x : v) x = static_cast<int32_t>(rng.uniform(0.0f, 22.99f));
    return v;
  };
  auto array = lm({0, 1, 2}), ref = lm({0, 1, 2});
  auto run = [&](std::initializer_list<LanguageModel*> models, int64_t T) {
    std::vector<int32_t> in = window(T), out = window(T);
    const IndexView inputs(in.data(), {S, T}), targets(out.data(), {S, T});
    for (LanguageModel* m : models) m->train_step(inputs, targets);
  };
  run({array.get(), ref.get()}, 6);
  run({array.get(), ref.get()}, 4);  // records the net for windows of 4
  array->reinit_slot(1, 40);
  auto fresh = lm({0, 40, 2});
  auto alone = lm({40});
  EXPECT_EQ(array->net().params()[0].value.replica(1).data[0],
            alone->net().params()[0].value.data[0]);
  for (size_t i = 0; i < array->params().size(); ++i)
    EXPECT_TRUE(same_bits(array->params()[i].value.replica(1), alone->params()[i].value))
        << array->params()[i].name;
  for (int64_t T : {6, 4, 6}) {
    SCOPED_TRACE(fmt::format("window of {}", T));
    run({array.get(), ref.get(), fresh.get()}, T);
    for (int64_t b = 0; b < B; ++b) {
      const LanguageModel& same = b == 1 ? *fresh : *ref;
      EXPECT_EQ(array->losses()[b], same.losses()[b]) << "slot " << b;
      for (size_t i = 0; i < array->params().size(); ++i)
        EXPECT_TRUE(same_bits(array->params()[i].grad.replica(b), same.params()[i].grad.replica(b)))
            << array->params()[i].name << " gradient of slot " << b;
    }
  }
  const std::vector<int64_t> keep = {2, 1};
  auto small = compact(*array, keep);
  EXPECT_EQ(small->spec().model_ids, (std::vector<int64_t>{2, 40}));
  for (int64_t T : {6, 4}) {
    run({array.get(), small.get()}, T);
    for (size_t i = 0; i < keep.size(); ++i)
      EXPECT_NEAR(small->losses()[i], array->losses()[static_cast<size_t>(keep[i])],
                  2e-5 * std::fabs(array->losses()[static_cast<size_t>(keep[i])]));
  }
  EXPECT_THROW(array->reinit_slot(3, 1), Error);
  EXPECT_THROW(compact(*array, std::vector<int64_t>{1, 1}), Error);
}

}  // namespace
}  // namespace hfta
