// libFuzzer target: the input as each file of a minimal ShapeNet part folder in turn (a point
// file, a label file, the test split's list, the category file; the others valid), read by
// load_shapenet_part for the test split.
// A read succeeds or throws hfta::Error; anything else (a crash, a sanitizer report, an allocation
// over -rss_limit_mb, another exception) is a finding. See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "datasets/shapenet_part.h"
#include "fuzz/fuzz_input.h"
#include "tests/io/seed_workflow_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const hfta::seeds::ShapeNetSeedFolder folder = hfta::seeds::write_shapenet_folder(
      std::filesystem::path(hfta::fuzz::temp_dir()) / "shapenet");
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto valid = hfta::seeds::shapenet_files();
  const std::string slots[] = {folder.pts, folder.seg, folder.test_list, folder.categories};
  for (size_t i = 0; i < std::size(slots); ++i) {
    hfta::seeds::write_text(slots[i], input);
    try {
      hfta::load_shapenet_part(folder.dir, hfta::Split::kTest, {.npoints = 8, .seed = 1});
    } catch (const hfta::Error&) {
      // expected: the reader refused the file
    }
    hfta::seeds::write_text(slots[i], valid[i].second);
  }
  return 0;
}
