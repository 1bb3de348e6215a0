// The layers of docs/design.md hold: a source file includes headers of its own folder and of the
// folders below it in the list, never of one above, and CLI11 appears only in cli/ (the command
// line fills plain option structs; no CLI type reaches the workflows).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

// Bottom first, as docs/design.md lists them.
const std::vector<std::string> kLayers = {"core",     "backend", "fused_ops", "optim",
                                          "datasets", "models",  "io",        "run",
                                          "tasks",    "sweep",   "tune",      "cli"};

int layer_of(const std::string& folder) {
  const auto it = std::find(kLayers.begin(), kLayers.end(), folder);
  return it == kLayers.end() ? -1 : static_cast<int>(it - kLayers.begin());
}

TEST(Layers, IncludesPointDownAndCli11StaysInCli) {
  namespace fs = std::filesystem;
  const fs::path root(HFTA_SOURCE_DIR);
  const std::regex include(R"re(^\s*#include\s+"([a-z_]+)/)re");
  int files = 0;
  for (const std::string& folder : kLayers) {
    ASSERT_TRUE(fs::is_directory(root / folder)) << root / folder;
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        std::smatch m;
        if (std::regex_search(line, m, include)) {
          const int target = layer_of(m[1].str());
          EXPECT_TRUE(target <= layer_of(folder))
              << fs::relative(entry.path(), root).string() << ":" << number << " (" << folder
              << "/) includes " << m[1].str() << "/, a layer above it: " << line;
        }
        if (folder != "cli") {
          EXPECT_EQ(line.find("CLI/CLI.hpp"), std::string::npos)
              << fs::relative(entry.path(), root).string() << ":" << number
              << " uses CLI11 outside cli/";
        }
      }
    }
  }
  EXPECT_GT(files, 100) << "scanned too few files under " << root;
}

}  // namespace
