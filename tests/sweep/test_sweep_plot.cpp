// The plots of a sweep: the per-(mode, B) summary of throughput.csv, the gnuplot script, running
// gnuplot (or warning without it), and plot.json, the title and budget line that --plot-only
// redraws with. The CSVs come from the engine driven by a fake runner (tests/sweep_fakes.h);
// test_sweep_process.cpp runs `hfta sweep --plot-only` itself.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/csv.h"
#include "sweep/plot.h"
#include "sweep/sweep.h"
#include "sweep_fakes.h"
#include "test_files.h"
#include "test_util.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;
using test::by_ref;
using test::expect_error_containing_all;
using test::FakeRunner;
using test::small_sweep;
using test::TempDir;

TEST(SweepPlot, SummaryAndScriptCoverEveryModeAndOnlyMeasuredPoints) {
  TempDir tmp("plot");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  FakeRunner fake;
  fake.failures[{SweepMode::kConcurrent, 4}] = "failed on purpose";
  run_sweep(o, by_ref(fake), nullptr);
  auto points = summarize_sweep(read_csv((dir / "throughput.csv").string()));
  ASSERT_EQ(points.size(), 3u + 2 + 3);  // concurrent B=4 never succeeded
  const SweepPoint& fused2 = points[6];
  EXPECT_EQ(fused2.mode, "fused");
  EXPECT_EQ(fused2.B, 2);
  EXPECT_EQ(fused2.runs, 3);
  EXPECT_NEAR(fused2.normalized_min, 301.0 / 110, 1e-4);
  EXPECT_NEAR(fused2.normalized_max, 303.0 / 110, 1e-4);
  EXPECT_NEAR(fused2.normalized_median, 302.0 / 110, 1e-4);
  EXPECT_NEAR(fused2.rss_mib_median, 20.0, 0.01);

  std::string script = gnuplot_script(points, "pointnet_seg", int64_t{1} << 30);
  for (const char* needle :
       {"set termoption noenhanced", "set title \"pointnet_seg: throughput", "$serial << EOD",
        "$concurrent << EOD", "$fused << EOD", "title \"serial\"", "title \"concurrent\"",
        "title \"fused\"", "set output \"throughput.png\"", "set output \"memory.png\"",
        "filledcurves", "memory budget", "set xtics (1, 2, 4)"})
    EXPECT_NE(script.find(needle), std::string::npos) << "script lacks " << needle;
  // The concurrent block has B = 1 and 2 only.
  size_t begin = script.find("$concurrent << EOD\n"), end = script.find("EOD\n", begin + 18);
  std::string block = script.substr(begin + 19, end - begin - 19);
  EXPECT_EQ(std::count(block.begin(), block.end(), '\n'), 2) << block;
  EXPECT_EQ(block.rfind("4 ", 0), std::string::npos);
}

// The lines of `text`.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = text.find('\n', begin);
    lines.push_back(text.substr(begin, end - begin));
    begin = end == std::string::npos ? text.size() : end + 1;
  }
  return lines;
}

// The fake sweep's medians (tests/sweep_fakes.h): serial B=1 110 samples/s (the baseline), then
// 100 * B * (1, 1.2, 1.5 for serial, concurrent, fused) + 2; concurrent B=4 failed, so fused is
// compared with serial alone there.
TEST(SweepPlot, FusionTableComparesFusedWithTheBestOtherModeAtEachB) {
  TempDir tmp("table");
  SweepOptions o = small_sweep(tmp.path);
  FakeRunner fake;
  fake.failures[{SweepMode::kConcurrent, 4}] = "failed on purpose";
  run_sweep(o, by_ref(fake), nullptr);
  const std::string table =
      fusion_table(summarize_sweep(read_csv((tmp.path / "throughput.csv").string())));
  const std::vector<std::string> lines = lines_of(table);
  ASSERT_EQ(lines.size(), 5u) << table;
  EXPECT_EQ(lines[0], "medians over the repeats, normalized to serial B=1:");
  EXPECT_EQ(lines[1], "   B    serial  concurrent     fused  fused / best other");
  const double base = 110.0;
  EXPECT_EQ(lines[2], fmt::format("   1  {:>8.2f}  {:>10.2f}  {:>8.2f}  {:>18.3f}", 1.0, 122 / base,
                                  152 / base, 152.0 / 122));
  EXPECT_EQ(lines[3], fmt::format("   2  {:>8.2f}  {:>10.2f}  {:>8.2f}  {:>18.3f}", 202 / base,
                                  242 / base, 302 / base, 302.0 / 242));
  EXPECT_EQ(lines[4], fmt::format("   4  {:>8.2f}  {:>10}  {:>8.2f}  {:>18.3f}", 402 / base, "-",
                                  602 / base, 602.0 / 402));
}

// Two fused plans get a ratio column each; without the baseline the table is in samples/s; a B
// where no other mode ran has no ratio.
TEST(SweepPlot, FusionTableWithSeveralPlansAndNoBaseline) {
  auto point = [](const std::string& mode, int64_t B, double samples) {
    SweepPoint p;
    p.mode = mode;
    p.B = B;
    p.runs = 1;
    p.samples_median = p.samples_min = p.samples_max = samples;
    return p;
  };
  const std::string table =
      fusion_table({point("serial", 2, 200), point("serial", 4, 400), point("fused (auto)", 2, 300),
                    point("fused (threads)", 2, 250), point("fused (auto)", 8, 900)});
  const std::vector<std::string> lines = lines_of(table);
  ASSERT_EQ(lines.size(), 5u) << table;
  EXPECT_EQ(lines[0], "medians over the repeats, samples/s:");
  EXPECT_EQ(lines[1],
            "   B    serial  fused (auto)  fused (threads)  fused (auto) / best other  "
            "fused (threads) / best other");
  EXPECT_EQ(lines[2], fmt::format("   2  {:>8}  {:>12}  {:>15}  {:>25}  {:>28}", 200, 300, 250,
                                  "1.500", "1.250"));
  EXPECT_EQ(lines[3],
            fmt::format("   4  {:>8}  {:>12}  {:>15}  {:>25}  {:>28}", 400, "-", "-", "-", "-"));
  EXPECT_EQ(lines[4],
            fmt::format("   8  {:>8}  {:>12}  {:>15}  {:>25}  {:>28}", "-", 900, "-", "-", "-"));
  EXPECT_TRUE(fusion_table({}).find("   B") != std::string::npos);
}

TEST(SweepPlot, PlotsWithGnuplotOrWarns) {
  TempDir tmp("png");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  FakeRunner fake;
  run_sweep(o, by_ref(fake), nullptr);
  std::vector<std::string> warnings;
  bool plotted =
      plot_sweep(dir.string(), "lenet", 0, [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_TRUE(fs::exists(dir / "sweep.gp"));
  if (plotted) {
    EXPECT_GT(fs::file_size(dir / "throughput.png"), 1000u);
    EXPECT_GT(fs::file_size(dir / "memory.png"), 1000u);
  } else {
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("gnuplot"), std::string::npos);
  }
}

TEST(SweepPlot, MissingGnuplotIsAWarningNotAnError) {
  TempDir tmp("nognuplot");
  const fs::path& dir = tmp.path;
  SweepOptions o = small_sweep(dir);
  o.repeats = 1;
  FakeRunner fake;
  run_sweep(o, by_ref(fake), nullptr);
  const char* old = std::getenv("PATH");
  std::string saved = old ? old : "";
  setenv("PATH", dir.c_str(), 1);  // no gnuplot there
  std::vector<std::string> warnings;
  bool plotted =
      plot_sweep(dir.string(), "lenet", 0, [&](const std::string& w) { warnings.push_back(w); });
  setenv("PATH", saved.c_str(), 1);
  EXPECT_FALSE(plotted);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("gnuplot-nox"), std::string::npos) << warnings[0];
  EXPECT_TRUE(fs::exists(dir / "throughput.csv"));
}

TEST(SweepPlotSettings, SavedSettingsReadBackAndAMissingFileIsNone) {
  TempDir tmp("plot_settings");
  EXPECT_FALSE(load_plot_settings(tmp.str()).has_value());
  // Quotes and a backslash survive the round trip (gnuplot_script escapes them itself).
  const PlotSettings saved{"lenet (fashion-mnist, batch 64) on \"CPU\" \\ X (AVX2), 2 threads",
                           int64_t{3} << 30};
  save_plot_settings(tmp.str(), saved);
  const auto loaded = load_plot_settings(tmp.str());
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->title, saved.title);
  EXPECT_EQ(loaded->memory_budget_bytes, saved.memory_budget_bytes);
}

TEST(SweepPlotSettings, AMalformedFileNamesItselfAndTheProblem) {
  TempDir tmp("plot_settings_bad");
  const fs::path path = tmp.path / "plot.json";
  struct Case {
    std::string text, problem;
  };
  for (const Case& c : std::vector<Case>{
           {"not json", "parse error"},
           {"{\"memory_budget_bytes\": 0}", "'title' not found"},
           {"{\"title\": 3, \"memory_budget_bytes\": 0}", "type must be string"},
           {"{\"title\": \"t\", \"memory_budget_bytes\": -1}",
            "memory_budget_bytes -1 is negative"},
       }) {
    SCOPED_TRACE(c.text);
    std::ofstream(path, std::ios::trunc) << c.text;
    expect_error_containing_all([&] { load_plot_settings(tmp.str()); }, {path.string(), c.problem});
  }
}

}  // namespace
}  // namespace hfta
