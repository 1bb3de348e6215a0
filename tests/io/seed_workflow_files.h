// Valid small files of the workflows' readers (text corpora, ShapeNet part folders, the plan
// cache, search spaces, a sweep's plot.json and throughput.csv, a tune run's history.csv and
// tune.json), written by the project's writers where it has them. The hostile-files replay
// (tests/io/test_hostile_files.cpp) and the fuzz targets' seed corpora (fuzz/seeds.cpp) start
// from them, and the fuzz targets read their inputs in the folders and with the keys made here.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/gemm_timing.h"
#include "core/error.h"
#include "io/csv.h"
#include "models/plan.h"
#include "run/plan_choice.h"
#include "sweep/plot.h"
#include "sweep/sweep.h"
#include "tune/tune.h"
#include "tune/tune_search.h"
#include "tune/tune_space.h"

namespace hfta::seeds {

using NamedText = std::pair<std::string, std::string>;  // file name, contents

// A new file each time: ext4 flushes a file truncated and rewritten in place at its close, and
// the fuzz targets rewrite the same files for every input.
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::remove(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  HFTA_CHECK(out.good(), "cannot write {}", path.string());
}

// --- text corpora -------------------------------------------------------------------------------

// A plain file and a fortune(6) file ('%' lines separate entries), each of at least 3 lines.
inline std::vector<NamedText> text_corpus_files() {
  return {{"lines.txt",
           "the quick brown fox jumps\nover the lazy dog 42 times\n\n  tabs\tand  spaces \r\n"
           "unicode caf\xc3\xa9 \xe2\x82\xac 3.5\nlast line without a break"},
          {"fortunes",
           "A day for firm decisions!\n%\nYou will be fortunate 7 times.\n  -- 1999\n%\n"
           "Expect the unexpected.\n%\n"}};
}

// --- ShapeNet part ------------------------------------------------------------------------------

// A minimal folder of two classes: Airplane (a standard class: 4 parts) and Widget (outside
// kShapeNetPartCounts: its part count comes from its labels), one shape each in every list.
// The reader-specific files the hostile inputs replace are Widget's points and labels, the test
// list and the category file.
struct ShapeNetSeedFolder {
  std::string dir, pts, seg, test_list, categories;
};

inline std::vector<NamedText> shapenet_files() {
  return {{"widget.pts", "0.5 -1.25 2\n1e-3 0 -7.5\n+3 4 5\n-0.25 0.125 1e2\n"},
          {"widget.seg", "1\n2\n2\n3\n"},
          {"test_list.json",
           "[\"shape_data/02691156/plane1\", \"shape_data/99999999/widget1\", "
           "\"shape_data/00000000/left_out\"]"},
          {"categories.txt", "Airplane\t02691156\nWidget\t99999999\n"}};
}

inline ShapeNetSeedFolder write_shapenet_folder(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const std::vector<NamedText> files = shapenet_files();
  for (const char* synset : {"02691156", "99999999"}) {
    fs::create_directories(dir / synset / "points");
    fs::create_directories(dir / synset / "points_label");
  }
  fs::create_directories(dir / "train_test_split");
  ShapeNetSeedFolder f{
      .dir = dir.string(),
      .pts = (dir / "99999999/points/widget1.pts").string(),
      .seg = (dir / "99999999/points_label/widget1.seg").string(),
      .test_list = (dir / "train_test_split/shuffled_test_file_list.json").string(),
      .categories = (dir / "synsetoffset2category.txt").string()};
  write_text(dir / "02691156/points/plane1.pts", "0 0 0\n1 0 0\n0 1 0\n0 0 1\n1 1 1\n");
  write_text(dir / "02691156/points_label/plane1.seg", "1\n2\n3\n4\n4\n");
  write_text(f.pts, files[0].second);
  write_text(f.seg, files[1].second);
  write_text(f.test_list, files[2].second);
  write_text(f.categories, files[3].second);
  for (const char* list : {"shuffled_train_file_list.json", "shuffled_val_file_list.json"})
    write_text(dir / "train_test_split" / list,
               "[\"shape_data/02691156/plane1\", \"shape_data/99999999/widget1\"]");
  return f;
}

// --- the plan cache -----------------------------------------------------------------------------

// The cache keys the seeds hold entries for (the plan cache's keys name the CPU, threads,
// configuration and build; these are of the same shape).
inline constexpr const char* kPlanKey = "Seed CPU | 4 threads | mlp [1,4,4] B=8 | build 00ff";
inline constexpr const char* kOtherPlanKey = "Seed CPU | 2 threads | lenet B=3 | build 00ff";
inline constexpr const char* kRoutingKey = "Seed CPU | sgemm libraries | seed | seed";

// A cache written by cache_plan (two configurations), and one holding an sgemm routing as
// choose_gemm_library writes it.
inline std::vector<NamedText> plan_cache_files(const std::filesystem::path& scratch) {
  const std::string path = (scratch / "plans.json").string();
  std::filesystem::remove(path);
  const auto ignore = [](const std::string&) {};
  cache_plan(path, kPlanKey, ExecutionPlan::parse("threads:1/8"),
             {{"fused", 2.5}, {"chunk:2", 1.75}, {"threads:1/8", 1.25}}, ignore);
  cache_plan(path, kOtherPlanKey, ExecutionPlan::parse("fused"), {{"fused", 10}}, ignore);
  std::ifstream in(path, std::ios::binary);
  std::string plans{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::string routing = fmt::format("{{\n  \"{}\": {{\n    \"routing\": {{", kRoutingKey);
  for (size_t i = 0; i < std::size(cpu::kTimedGemmCases); ++i)
    routing += fmt::format(
        "{}\"{}\": \"{}\"", i ? ", " : "", cpu::gemm_case_name(cpu::kTimedGemmCases[i]),
        cpu::gemm_backend_name(i % 2 ? cpu::GemmBackend::kOpenBlas : cpu::GemmBackend::kOneDnn));
  routing += "},\n    \"timings_ms\": {\"64x64\": {\"onednn\": 0.5, \"openblas\": 0.75}}\n  }\n}\n";
  return {{"plans.json", plans}, {"routing.json", routing}};
}

// --- search spaces ------------------------------------------------------------------------------

// tune/spaces/lenet.json and transformer.json, and the example of tune_space.h with an int.
inline std::vector<NamedText> search_space_files() {
  return {
      {"lenet.json",
       "{\n  \"lr\": {\"dist\": \"loguniform\", \"low\": 1e-4, \"high\": 1e-1, \"fusible\": "
       "true},\n"
       "  \"beta1\": {\"dist\": \"uniform\", \"low\": 0.8, \"high\": 0.99, \"fusible\": true},\n"
       "  \"weight_decay\": {\"dist\": \"choice\", \"values\": [0, 1e-5, 1e-4]},\n"
       "  \"batch_size\": {\"dist\": \"choice\", \"values\": [32, 64], \"fusible\": false}\n}\n"},
      {"transformer.json",
       "{\n  \"optimizer\": {\"dist\": \"choice\", \"values\": [\"adadelta\"], \"fusible\": "
       "false},\n"
       "  \"lr\": {\"dist\": \"loguniform\", \"low\": 0.25, \"high\": 4.0},\n"
       "  \"rho\": {\"dist\": \"uniform\", \"low\": 0.85, \"high\": 0.95},\n"
       "  \"clip\": {\"dist\": \"loguniform\", \"low\": 0.1, \"high\": 1.0},\n"
       "  \"lr_gamma\": {\"dist\": \"choice\", \"values\": [0.5, 0.8, 1.0]},\n"
       "  \"dropout\": {\"dist\": \"choice\", \"values\": [0.1, 0.2], \"fusible\": false}\n}\n"},
      {"mixed.json",
       "{\"lr\": {\"dist\": \"loguniform\", \"low\": 1e-4, \"high\": 1e-1},\n"
       " \"lr_step_size\": {\"dist\": \"int\", \"low\": 1, \"high\": 30},\n"
       " \"batch_size\": {\"dist\": \"int\", \"low\": 16, \"high\": 128},\n"
       " \"optimizer\": {\"dist\": \"choice\", \"values\": [\"adam\", \"sgd\"]}}\n"}};
}

// --- a sweep's plot.json and throughput.csv -----------------------------------------------------

// Written by save_plot_settings and a CsvWriter of throughput_columns(): serial, concurrent and
// two fused plans, a failed repeat, a baseline.
inline std::vector<NamedText> sweep_files(const std::filesystem::path& scratch) {
  namespace fs = std::filesystem;
  save_plot_settings(scratch.string(), {.title = "mlp on synthetic, batch 64, \"Seed CPU\"",
                                        .memory_budget_bytes = int64_t{3} << 30});
  {
    CsvWriter csv((scratch / "throughput.csv").string(), throughput_columns());
    const auto row = [&](const std::string& mode, const std::string& plan, int64_t B, int repeat,
                         const std::string& status, const std::string& sps,
                         const std::string& normalized) {
      std::vector<std::string> fields;
      for (const std::string& c : throughput_columns())
        fields.push_back(c == "model"                       ? "mlp"
                         : c == "mode"                      ? mode
                         : c == "plan_asked" || c == "plan" ? plan
                         : c == "B"                         ? std::to_string(B)
                         : c == "repeat"                    ? std::to_string(repeat)
                         : c == "status"                    ? status
                         : c == "samples_per_s"             ? sps
                         : c == "normalized"                ? normalized
                         : c == "peak_rss_mib"              ? std::to_string(100 + 10 * B)
                         : c == "error" ? (status == "ok" ? "" : "killed, \"OOM\"")
                                        : "1.5");
      csv.row(fields);
    };
    row("serial", "fused", 1, 0, "ok", "1000", "1");
    row("serial", "fused", 1, 1, "ok", "1010.5", "1.0105");
    row("serial", "fused", 4, 0, "ok", "1000", "1");
    row("concurrent", "fused", 4, 0, "ok", "2500", "2.5");
    row("fused", "fused", 4, 0, "ok", "3500", "3.5");
    row("fused", "threads:1/8", 4, 0, "ok", "3900", "3.9");
    row("fused", "threads:1/8", 8, 0, "failed", "", "");
  }
  const auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  };
  return {{"plot.json", read(scratch / "plot.json")},
          {"throughput.csv", read(scratch / "throughput.csv")}};
}

// --- a tune run's history.csv and tune.json -----------------------------------------------------

inline const char* tune_space_text() {
  return "{\"lr\": {\"dist\": \"loguniform\", \"low\": 1e-4, \"high\": 1e-1},\n"
         " \"batch_size\": {\"dist\": \"choice\", \"values\": [32, 64], \"fusible\": false}}\n";
}
inline TuneSpace tune_space() { return TuneSpace::parse(tune_space_text(), "space.json", "adam"); }
inline TuneOptions tune_options() {
  TuneOptions o;
  o.model = "lenet";
  o.dataset = "synthetic";
  o.space = "space.json";
  o.schedule.algorithm = "asha";
  o.schedule.num_samples = 6;
  o.schedule.max_iters = 4;
  return o;
}

// history.csv as TuneSearch writes it (a CsvWriter of history_columns): ok, failed and stopped
// rows; tune.json as run_tune writes it (tune_state_json).
inline std::vector<NamedText> tune_state_files(const std::filesystem::path& scratch) {
  const TuneSpace space = tune_space();
  const std::string path = (scratch / "history.csv").string();
  {
    CsvWriter csv(path, history_columns(space));
    const TuneConfig c0 = space.sample(1, 0), c1 = space.sample(1, 1);
    csv.row({"0", c0.at("batch_size").str(), c0.at("lr").str(), "0", "0", "0", "1", "0.625",
             "1.0712", "0.625", "120", "2.250", "2.250", "ok"});
    csv.row({"1", c1.at("batch_size").str(), c1.at("lr").str(), "0", "0", "0", "1", "nan", "nan",
             "nan", "0", "0.500", "3.125", "failed"});
    csv.row({"0", c0.at("batch_size").str(), c0.at("lr").str(), "0", "1", "1", "3", "0.75", "0.5",
             "0.75", "360", "4.000", "7.500", "ok"});
    csv.row({"2", c0.at("batch_size").str(), c0.at("lr").str(), "0", "0", "0", "1", "nan", "nan",
             "nan", "40", "1.000", "8.000", "stopped"});
  }
  std::ifstream in(path, std::ios::binary);
  std::string history{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return {{"history.csv", history}, {"tune.json", tune_state_json(tune_options(), space)}};
}

}  // namespace hfta::seeds
