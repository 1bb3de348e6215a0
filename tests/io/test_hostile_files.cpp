// Hostile bytes for the workflows' readers, as tests/io/test_hostile_bytes.cpp does for the binary
// formats: text corpora (load_text_files, load_wikitext2), ShapeNet part folders, the plan cache,
// tune search spaces, a sweep's plot.json and throughput.csv, and a tune run's history.csv and
// tune.json as --resume reads them. Each meets thousands of seeded mutations of a valid file
// (tests/io/seed_workflow_files.h) with its numbers set to hostile values (2^40, 2^63-1, -1,
// 1e300, ...); every read succeeds or throws hfta::Error naming the file, never crashes, hangs,
// throws anything else or grows the peak memory by more than 64 MiB. Then files whose size or
// numbers claim about a terabyte are refused at once, without the allocation.
//
// HFTA_FUZZ_SEED=<seed> replays one mutation; HFTA_FUZZ_ITERS=<n> sets the mutations per seed file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>

#include "datasets/shapenet_part.h"
#include "datasets/text_corpus.h"
#include "hostile_bytes.h"
#include "run/plan_choice.h"
#include "sweep/plot.h"
#include "tests/io/seed_workflow_files.h"
#include "tune/tune.h"
#include "tune/tune_search.h"
#include "tune/tune_space.h"

namespace hfta {
namespace {

// A text file as a seed: its lines' starts are the boundaries, and all of it is text whose
// numbers get hostile values.
SeedFile text_seed(const std::string& name, const std::string& bytes) {
  SeedFile seed{.name = name, .bytes = bytes, .text_begin = 0, .text_end = bytes.size()};
  for (size_t at = 0;;) {
    seed.boundaries.push_back(at);
    const size_t line_end = bytes.find('\n', at);
    if (line_end == std::string::npos) break;
    at = line_end + 1;
  }
  seed.boundaries.push_back(bytes.size());
  return seed;
}

// A sparse file of a terabyte beginning with `start`; false when the file system refuses one.
bool write_sparse_terabyte(const std::string& path, const std::string& start) {
  write_bytes(path, start);
  std::error_code ec;
  fs::resize_file(path, uintmax_t{1} << 40, ec);
  return !ec;
}

constexpr const char* kTerabyte = "1099511627776";

// --- text corpora -------------------------------------------------------------------------------

TEST(HostileFiles, TextCorpora) {
  TempDir tmp("hostile_text");
  const std::string path = tmp.str() + "/corpus.txt";
  for (const auto& [name, text] : seeds::text_corpus_files()) {
    write_bytes(path, text);
    EXPECT_GE(load_text_files({path}).train.size(), 1u) << name;
    replay("text files", text_seed(name, text), path, [&] {
      const TextCorpus c = load_text_files({path});
      EXPECT_FALSE(c.train.empty() || c.valid.empty() || c.test.empty());
    });
  }
  // WikiText-2: each split in turn, the others valid.
  const std::string text = seeds::text_corpus_files()[0].second;
  for (const char* split : {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"})
    write_bytes(tmp.str() + "/" + split, text);
  for (const char* split : {"wiki.train.tokens", "wiki.test.tokens"}) {
    replay(std::string("wikitext2 ") + split, text_seed("lines.txt", text), tmp.str() + "/" + split,
           [&] {
             const TextCorpus c = load_wikitext2(tmp.str());
             for (const auto* ids : {&c.train, &c.valid, &c.test})
               for (int32_t id : *ids) ASSERT_LT(id, c.vocab_size());
           });
    write_bytes(tmp.str() + "/" + split, text);
  }
}

// A text file is held in memory whole: one of a terabyte is refused from its size.
TEST(HostileFiles, TextFilesOfATerabyteAreRefusedBeforeReading) {
  TempDir tmp("hostile_text_tb");
  const std::string path = tmp.str() + "/wiki.train.tokens";
  if (!write_sparse_terabyte(path, "a b c\n"))
    GTEST_SKIP() << "this file system refuses a sparse terabyte file";
  expect_quick_refusal([&] { load_text_files({path}); }, path, {std::string(kTerabyte) + " bytes"});
  expect_quick_refusal([&] { load_wikitext2(tmp.str()); }, path, {"memory available"});
}

// --- ShapeNet part ------------------------------------------------------------------------------

TEST(HostileFiles, ShapeNetPart) {
  TempDir tmp("hostile_shapenet");
  const seeds::ShapeNetSeedFolder folder = seeds::write_shapenet_folder(tmp.path);
  const auto read = [&] {
    const PointCloudSet set = load_shapenet_part(folder.dir, Split::kTest, {.npoints = 8});
    for (int32_t part : set.part_labels) ASSERT_LT(part, set.num_parts);
  };
  const PointCloudSet valid = load_shapenet_part(folder.dir, Split::kTest, {.npoints = 8});
  EXPECT_EQ(valid.size, 2);
  EXPECT_EQ(valid.num_parts, 4 + 3);  // Airplane's 4, Widget's largest label
  const auto files = seeds::shapenet_files();
  const std::string slots[] = {folder.pts, folder.seg, folder.test_list, folder.categories};
  for (size_t i = 0; i < files.size(); ++i) {
    replay("shapenet part", text_seed(files[i].first, files[i].second), slots[i], read);
    write_bytes(slots[i], files[i].second);
  }
}

// A label is a part number: in a class outside the standard table it sets the class's part count,
// so 2^31-1 claimed 8 GiB of part tables; it is refused naming the line.
TEST(HostileFiles, ShapeNetLabelsClaimingBillionsOfPartsAreRefused) {
  TempDir tmp("hostile_shapenet_parts");
  const seeds::ShapeNetSeedFolder folder = seeds::write_shapenet_folder(tmp.path);
  for (const std::string label : {"2147483647", kTerabyte, "1025"}) {
    write_bytes(folder.seg, "1\n" + label + "\n2\n3\n");
    expect_quick_refusal([&] { load_shapenet_part(folder.dir, Split::kTest, {.npoints = 8}); },
                         folder.seg, {"line 2", label});
  }
  write_bytes(folder.seg, "1\n1024\n2\n3\n");  // the most parts a class may have
  EXPECT_EQ(load_shapenet_part(folder.dir, Split::kTest, {.npoints = 8}).num_parts, 4 + 1024);
  write_bytes(folder.seg, "\n");
  test::expect_error_containing_all(
      [&] { load_shapenet_part(folder.dir, Split::kTest, {.npoints = 8}); },
      {folder.categories, "Widget", folder.seg});
}

TEST(HostileFiles, ShapeNetPointFilesOfATerabyteAreRefusedBeforeReading) {
  TempDir tmp("hostile_shapenet_tb");
  const seeds::ShapeNetSeedFolder folder = seeds::write_shapenet_folder(tmp.path);
  if (!write_sparse_terabyte(folder.pts, "0 0 0\n"))
    GTEST_SKIP() << "this file system refuses a sparse terabyte file";
  expect_quick_refusal([&] { load_shapenet_part(folder.dir, Split::kTest, {.npoints = 8}); },
                       folder.pts, {std::string(kTerabyte) + " bytes"});
}

// --- the plan cache -----------------------------------------------------------------------------

// Only a cache: whatever it holds, a lookup returns a plan or nothing, and never throws.
TEST(HostileFiles, PlanCache) {
  TempDir tmp("hostile_plan_cache");
  const std::string path = tmp.str() + "/plans.json";
  for (const auto& [name, text] : seeds::plan_cache_files(tmp.path)) {
    write_bytes(path, text);
    if (name == "plans.json") {
      ASSERT_TRUE(cached_plan(path, seeds::kPlanKey).has_value());
      EXPECT_EQ(cached_plan(path, seeds::kPlanKey)->str(), "threads:1/8");
    } else {
      EXPECT_TRUE(cached_gemm_routing(path, seeds::kRoutingKey).has_value());
    }
    replay("plan cache", text_seed(name, text), path, [&] {
      for (const char* key : {seeds::kPlanKey, seeds::kOtherPlanKey, seeds::kRoutingKey}) {
        if (const auto plan = cached_plan(path, key)) {
          EXPECT_FALSE(plan->str().empty());
        }
        cached_gemm_routing(path, key);
      }
    });
  }
}

TEST(HostileFiles, PlanCacheOfATerabyteReadsAsEmptyAtOnce) {
  TempDir tmp("hostile_plan_cache_tb");
  const std::string path = tmp.str() + "/plans.json";
  if (!write_sparse_terabyte(path, "{\"a\": {\"plan\": \"fused\"}"))
    GTEST_SKIP() << "this file system refuses a sparse terabyte file";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(cached_plan(path, "a").has_value());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
}

// --- search spaces ------------------------------------------------------------------------------

TEST(HostileFiles, SearchSpaces) {
  TempDir tmp("hostile_space");
  const std::string path = tmp.str() + "/space.json";
  for (const auto& [name, text] : seeds::search_space_files()) {
    write_bytes(path, text);
    EXPECT_FALSE(TuneSpace::load(path, "adam").params().empty()) << name;
    replay("search space", text_seed(name, text), path, [&] {
      const TuneSpace space = TuneSpace::load(path, "adam");
      for (int64_t i = 0; i < 3; ++i) {
        const TuneConfig config = space.sample(7, i);
        const ArrayKey key = array_key(config, {.optimizer = "adam"});
        EXPECT_GE(key.batch_size, 1);
        config_hyper(config, key.optimizer);
      }
    });
  }
}

// Integers drawn from a space become int64_t and hyperparameters floats: values past 2^53 or
// float's range are refused naming the parameter, and a file of a terabyte from its size.
TEST(HostileFiles, SearchSpacesClaimingHugeValuesAreRefused) {
  TempDir tmp("hostile_space_tb");
  const std::string path = tmp.str() + "/space.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"batch_size": {"dist": "choice", "values": [1e300]}})", "batch_size"},
      {R"({"batch_size": {"dist": "int", "low": 1, "high": 18446744073709551615}})", "batch_size"},
      {R"({"lr_step_size": {"dist": "int", "low": 1, "high": 1e19}})", "lr_step_size"},
      {R"({"lr": {"dist": "uniform", "low": 0, "high": 1e300}})", "\"lr\""},
      {R"({"lr": {"dist": "choice", "values": [-1e39]}})", "\"lr\""}};
  for (const auto& [text, param] : cases) {
    write_bytes(path, text);
    expect_quick_refusal([&] { TuneSpace::load(path, "adam"); }, path, {param});
  }
  if (!write_sparse_terabyte(path, "{\"lr\": "))
    GTEST_SKIP() << "this file system refuses a sparse terabyte file";
  expect_quick_refusal([&] { TuneSpace::load(path, "adam"); }, path,
                       {std::string(kTerabyte) + " bytes"});
}

// --- a sweep's plot.json and throughput.csv -----------------------------------------------------

TEST(HostileFiles, SweepResults) {
  TempDir tmp("hostile_sweep");
  const auto files = seeds::sweep_files(tmp.path);
  ASSERT_EQ(load_plot_settings(tmp.str())->memory_budget_bytes, int64_t{3} << 30);
  const std::string csv = tmp.str() + "/throughput.csv";
  EXPECT_EQ(summarize_sweep(read_csv(csv)).size(), 5u);  // serial 1, 4; concurrent; two fused
  replay("plot settings", text_seed(files[0].first, files[0].second), tmp.str() + "/plot.json",
         [&] { EXPECT_GE(load_plot_settings(tmp.str())->memory_budget_bytes, 0); });
  replay("sweep results", text_seed(files[1].first, files[1].second), csv, [&] {
    const std::vector<SweepPoint> points = summarize_sweep(read_csv(csv));
    for (const SweepPoint& p : points) EXPECT_GE(p.B, 1);
    gnuplot_script(points, "t", 0);
  });
}

TEST(HostileFiles, SweepResultsClaimingHugeNumbersAreReadOrRefusedAtOnce) {
  TempDir tmp("hostile_sweep_tb");
  const std::string plot = tmp.str() + "/plot.json";
  for (const char* budget : {"1e300", "18446744073709551615", "-1", "2.5"}) {
    write_bytes(plot, fmt::format("{{\"title\": \"t\", \"memory_budget_bytes\": {}}}", budget));
    expect_quick_refusal([&] { load_plot_settings(tmp.str()); }, plot, {"memory_budget_bytes"});
  }
  // B counts models; nothing is sized by it, so 2^40 and 2^63-1 read at once, and 0 is refused.
  const std::string csv = tmp.str() + "/throughput.csv";
  std::string text = seeds::sweep_files(tmp.path)[1].second;
  const auto start = std::chrono::steady_clock::now();
  for (const char* B : {kTerabyte, "9223372036854775807"}) {
    write_bytes(csv,
                text + fmt::format("mlp,fused,fused,fused,{},0,ok,1,1,1,1,1,1,1,1,1,1,1,\n", B));
    const std::vector<SweepPoint> points = summarize_sweep(read_csv(csv));
    EXPECT_TRUE(std::any_of(points.begin(), points.end(), [&](const SweepPoint& p) {
      return p.B == std::stoll(B);
    })) << B;
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  write_bytes(csv, text + "mlp,fused,fused,fused,0,0,ok,1,1,1,1,1,1,1,1,1,1,1,\n");
  expect_quick_refusal([&] { summarize_sweep(read_csv(csv)); }, csv, {"line 9", "column B"});
}

// --- a tune run's history.csv and tune.json -----------------------------------------------------

TEST(HostileFiles, TuneState) {
  TempDir tmp("hostile_tune_state");
  const TuneSpace space = seeds::tune_space();
  const std::string state = tune_state_json(seeds::tune_options(), space);
  const auto files = seeds::tune_state_files(tmp.path);
  const std::string history = tmp.str() + "/history.csv", json = tmp.str() + "/tune.json";
  EXPECT_EQ(read_tune_history(history, space).size(), 3u);  // ok, failed, ok; not stopped
  write_bytes(json, files[1].second);
  check_tune_state(json, state);
  replay("tune history", text_seed(files[0].first, files[0].second), history, [&] {
    for (const TuneHistoryRow& row : read_tune_history(history, space)) {
      EXPECT_GE(row.trial, 0);
      EXPECT_GE(row.budget, 1);
    }
  });
  replay("tune state", text_seed(files[1].first, files[1].second), json,
         [&] { check_tune_state(json, state); });
}

TEST(HostileFiles, TuneStateClaimingHugeNumbersIsRefused) {
  TempDir tmp("hostile_tune_state_tb");
  const TuneSpace space = seeds::tune_space();
  const std::string state = tune_state_json(seeds::tune_options(), space);
  const std::string json = tmp.str() + "/tune.json";
  std::string text = state;
  text.replace(text.find("\"num_samples\": 6"), 16, std::string("\"num_samples\": ") + kTerabyte);
  write_bytes(json, text);
  expect_quick_refusal([&] { check_tune_state(json, state); }, json, {"num_samples", kTerabyte});
  for (const char* other : {"[1, 2]", "\"text\"", "{\"space\": 7}"}) {
    write_bytes(json, other);
    expect_quick_refusal([&] { check_tune_state(json, state); }, json, {"cannot --resume"});
  }
  // Trials and budgets are keys, not sizes: 2^40 reads at once; negative ones are refused.
  const std::string history = tmp.str() + "/history.csv";
  const std::string rows = seeds::tune_state_files(tmp.path)[0].second;
  write_bytes(history,
              rows + fmt::format("{},32,0.01,0,0,0,{},0.5,1,0.5,1,1,1,ok\n", kTerabyte, kTerabyte));
  EXPECT_EQ(read_tune_history(history, space).back().trial, int64_t{1} << 40);
  write_bytes(history, rows + "-1,32,0.01,0,0,0,1,0.5,1,0.5,1,1,1,ok\n");
  expect_quick_refusal([&] { read_tune_history(history, space); }, history,
                       {"line 6", "column trial", "'-1'"});
}

}  // namespace
}  // namespace hfta
