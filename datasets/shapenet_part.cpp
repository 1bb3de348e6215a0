#include "datasets/shapenet_part.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "core/parallel.h"
#include "core/rng.h"

namespace hfta {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWhereFrom =
    "expected PointNet's shapenetcore_partanno_segmentation_benchmark_v0 directory (from "
    "https://shapenet.cs.stanford.edu/ericyi/shapenetcore_partanno_segmentation_benchmark_v0.zip)";
constexpr uint64_t kResampleMix = 0x7368617065000001ull;

struct Category {
  std::string name, synset;
  int first_part = 0, num_parts = 0;
};

struct Entry {
  int cls = 0;
  std::string pts, seg;  // paths
  std::string where;     // "list file, entry k" for errors
};

// Part labels of a class outside kShapeNetPartCounts are taken from its .seg files; the standard
// classes have at most 6 parts, so a larger label is a corrupt file, not a class with that many
// parts (each part costs memory in the set's part tables).
constexpr int kMaxPartsPerClass = 1024;

std::string read_text(const std::string& path, const std::string& what) {
  check_file_fits_in_memory(path, "ShapeNet part " + what);
  std::ifstream in(path, std::ios::binary);
  HFTA_CHECK(in.good(), "cannot read ShapeNet part {} '{}'", what, path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Calls f(line, line_number) for each line, '\r' stripped; returns false as soon as f does.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  int64_t number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number;
    f(line, number);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

template <typename T>
bool parse_number(std::string_view word, T& value) {
  // from_chars takes no leading '+', which some exporters write.
  if (word.size() > 1 && word[0] == '+' && word[1] != '-') word.remove_prefix(1);
  const char* end = word.data() + word.size();
  auto [ptr, ec] = std::from_chars(word.data(), end, value);
  return ec == std::errc() && ptr == end;
}

std::vector<Category> read_categories(const std::string& dir) {
  const std::string path = (fs::path(dir) / "synsetoffset2category.txt").string();
  std::error_code ec;
  HFTA_CHECK(fs::exists(path, ec), "ShapeNet part category file '{}' is missing: {}", path,
             kWhereFrom);
  std::vector<Category> cats;
  for_each_line(read_text(path, "category file"), [&](std::string_view line, int64_t number) {
    const auto words = split_words(line);
    if (words.empty()) return;
    HFTA_CHECK(words.size() == 2,
               "ShapeNet part category file '{}' line {}: expected \"<class name> <synset id>\" "
               "(e.g. \"Airplane\t02691156\"), got '{}'",
               path, number, line);
    // Names end up in errors and output: a control byte (a NUL would cut an error short) is a
    // corrupt file.
    const auto control = std::find_if(line.begin(), line.end(), [](char ch) {
      return static_cast<unsigned char>(ch) < 0x20 && !is_space(ch);
    });
    HFTA_CHECK(control == line.end(),
               "ShapeNet part category file '{}' line {}: control byte 0x{:02x} in a class name "
               "or synset id",
               path, number, static_cast<unsigned char>(control == line.end() ? 0 : *control));
    for (const auto& c : cats)
      HFTA_CHECK(c.name != words[0] && c.synset != words[1],
                 "ShapeNet part category file '{}' line {}: class '{}' or synset '{}' is listed "
                 "twice",
                 path, number, words[0], words[1]);
    cats.push_back({std::string(words[0]), std::string(words[1])});
  });
  HFTA_CHECK(!cats.empty(), "ShapeNet part category file '{}' lists no class: {}", path,
             kWhereFrom);
  return cats;
}

std::vector<std::string> list_files(Split split) {
  if (split == Split::kTest) return {"shuffled_test_file_list.json"};
  return {"shuffled_train_file_list.json", "shuffled_val_file_list.json"};
}

// The entries of the split's lists whose synset is one of `cats`, in list order.
std::vector<Entry> read_lists(const std::string& dir, Split split,
                              const std::vector<Category>& cats) {
  std::map<std::string, int> class_of;
  for (size_t c = 0; c < cats.size(); ++c) class_of[cats[c].synset] = static_cast<int>(c);
  std::vector<Entry> entries;
  for (const auto& name : list_files(split)) {
    const std::string path = (fs::path(dir) / "train_test_split" / name).string();
    std::error_code ec;
    HFTA_CHECK(fs::exists(path, ec),
               "ShapeNet part split file '{}' is missing: the {} split needs {}; {}", path,
               split == Split::kTrain ? "training" : "test", fmt::join(list_files(split), " and "),
               kWhereFrom);
    nlohmann::json list;
    try {
      list = nlohmann::json::parse(read_text(path, "split file"));
    } catch (const nlohmann::json::exception& e) {
      fail("ShapeNet part split file '{}' is not valid JSON: {}", path, e.what());
    }
    HFTA_CHECK(list.is_array(),
               "ShapeNet part split file '{}' holds a JSON {}, expected an array of "
               "\"shape_data/<synset>/<id>\" strings",
               path, list.type_name());
    for (size_t k = 0; k < list.size(); ++k) {
      const auto& item = list[k];
      std::vector<std::string> parts;
      if (item.is_string()) {
        std::stringstream ss(item.get<std::string>());
        for (std::string p; std::getline(ss, p, '/');) parts.push_back(p);
      }
      HFTA_CHECK(
          parts.size() == 3 && parts[0] == "shape_data" && !parts[1].empty() && !parts[2].empty(),
          "ShapeNet part split file '{}' entry {} is {}, expected a string "
          "\"shape_data/<synset>/<id>\"",
          path, k, item.dump());
      const auto it = class_of.find(parts[1]);
      if (it == class_of.end()) continue;  // a class left out of the category file
      const fs::path shape_dir = fs::path(dir) / parts[1];
      Entry e{it->second, (shape_dir / "points" / (parts[2] + ".pts")).string(),
              (shape_dir / "points_label" / (parts[2] + ".seg")).string(),
              fmt::format("'{}' entry {} ({})", path, k, item.get<std::string>())};
      std::vector<std::string> missing;
      if (!fs::exists(e.pts, ec)) missing.push_back(e.pts);
      if (!fs::exists(e.seg, ec)) missing.push_back(e.seg);
      HFTA_CHECK(missing.empty(),
                 "ShapeNet part split file {} names a shape whose file{} missing: {}", e.where,
                 missing.size() == 1 ? " is" : "s are", fmt::join(missing, ", "));
      entries.push_back(std::move(e));
    }
  }
  return entries;
}

// The raw 1-based labels of a .seg file, checked to lie in [1, max_label] (0: the class's part
// count is not known yet, at most kMaxPartsPerClass).
std::vector<int32_t> read_seg(const std::string& path, int max_label) {
  std::vector<int32_t> labels;
  for_each_line(read_text(path, "label file"), [&](std::string_view line, int64_t number) {
    const auto words = split_words(line);
    if (words.empty()) return;
    int32_t v = 0;
    HFTA_CHECK(words.size() == 1 && parse_number(words[0], v) && v >= 1 &&
                   v <= (max_label == 0 ? kMaxPartsPerClass : max_label),
               "ShapeNet part label file '{}' line {}: expected one part label from 1 to {}, got "
               "'{}'",
               path, number,
               max_label == 0
                   ? fmt::format("{} (the most parts a class may have)", kMaxPartsPerClass)
                   : std::to_string(max_label),
               line);
    labels.push_back(v);
  });
  return labels;
}

std::vector<float> read_pts(const std::string& path) {
  std::vector<float> xyz;
  for_each_line(read_text(path, "point file"), [&](std::string_view line, int64_t number) {
    const auto words = split_words(line);
    if (words.empty()) return;
    float v[3];
    HFTA_CHECK(words.size() == 3 && parse_number(words[0], v[0]) && parse_number(words[1], v[1]) &&
                   parse_number(words[2], v[2]) && std::isfinite(v[0]) && std::isfinite(v[1]) &&
                   std::isfinite(v[2]),
               "ShapeNet part point file '{}' line {}: expected three finite numbers \"x y z\", "
               "got '{}'",
               path, number, line);
    xyz.insert(xyz.end(), v, v + 3);
  });
  HFTA_CHECK(!xyz.empty(), "ShapeNet part point file '{}' has no point", path);
  return xyz;
}

// Part counts: the standard table, or for other class names the largest label in their .seg
// files over every list (so both splits agree).
void count_parts(const std::string& dir, std::vector<Category>& cats) {
  const std::string category_file = (fs::path(dir) / "synsetoffset2category.txt").string();
  std::vector<bool> from_data(cats.size(), true);
  std::vector<std::string> seg_files(cats.size());  // one per class, for errors
  for (size_t c = 0; c < cats.size(); ++c)
    for (const auto& [name, count] : kShapeNetPartCounts)
      if (name == cats[c].name) cats[c].num_parts = count, from_data[c] = false;
  if (std::find(from_data.begin(), from_data.end(), true) != from_data.end()) {
    std::vector<Entry> all = read_lists(dir, Split::kTrain, cats);
    for (auto& e : read_lists(dir, Split::kTest, cats)) all.push_back(std::move(e));
    for (const auto& e : all) {
      if (!from_data[e.cls]) continue;
      if (seg_files[e.cls].empty()) seg_files[e.cls] = e.seg;
      for (int32_t label : read_seg(e.seg, 0))
        cats[e.cls].num_parts = std::max(cats[e.cls].num_parts, static_cast<int>(label));
    }
  }
  for (size_t c = 0; c < cats.size(); ++c)
    HFTA_CHECK(cats[c].num_parts >= 1,
               "ShapeNet part class '{}' of '{}' is not a standard class and its .seg files (such "
               "as '{}') hold no part label to count its parts from",
               cats[c].name, category_file, seg_files[c]);
  int first = 0;
  for (auto& c : cats) {
    c.first_part = first;
    first += c.num_parts;
  }
}

}  // namespace

PointCloudSet load_shapenet_part(const std::string& dir, Split split,
                                 const ShapeNetPartOptions& options) {
  const int64_t L = options.npoints;
  HFTA_CHECK(L >= 1, "ShapeNet part npoints must be at least 1, got {}", L);
  std::error_code ec;
  HFTA_CHECK(fs::is_directory(dir, ec), "ShapeNet part directory '{}' does not exist: {}", dir,
             kWhereFrom);
  std::vector<Category> cats = read_categories(dir);
  const std::vector<Entry> entries = read_lists(dir, split, cats);
  std::vector<int64_t> per_class(cats.size(), 0);
  for (const auto& e : entries) ++per_class[e.cls];
  std::vector<std::string> lists;
  for (const auto& name : list_files(split))
    lists.push_back((fs::path(dir) / "train_test_split" / name).string());
  for (size_t c = 0; c < cats.size(); ++c)
    HFTA_CHECK(per_class[c] > 0,
               "ShapeNet part class '{}' (synset {}) has no shape in the {} split ({}): remove its "
               "line from '{}' or add its shapes to the lists",
               cats[c].name, cats[c].synset, split == Split::kTrain ? "training" : "test",
               fmt::join(lists, ", "), (fs::path(dir) / "synsetoffset2category.txt").string());
  count_parts(dir, cats);

  PointCloudSet out;
  out.name = split == Split::kTrain ? "shapenet-part-train" : "shapenet-part-test";
  out.sample_shape = Shape{L, 3};
  out.size = static_cast<int64_t>(entries.size());
  out.num_classes = static_cast<int>(cats.size());
  for (const auto& c : cats) {
    out.class_names.push_back(c.name);
    std::vector<int32_t> parts(static_cast<size_t>(c.num_parts));
    for (int k = 0; k < c.num_parts; ++k) parts[k] = c.first_part + k;
    out.parts_of_class.push_back(std::move(parts));
    out.num_parts += c.num_parts;
  }
  out.images.resize(static_cast<size_t>(out.size * L * 3));
  out.labels.resize(static_cast<size_t>(out.size));
  out.part_labels.resize(static_cast<size_t>(out.size * L));

  // Errors cannot leave an OpenMP loop: each shape keeps its own, and the first one is thrown.
  std::vector<std::string> errors(entries.size());
  const uint64_t seed = options.seed ^ (kResampleMix * (split == Split::kTrain ? 1 : 2));
  parallel_for(out.size, [&](int64_t i) {
    try {
      const Entry& e = entries[i];
      const Category& c = cats[e.cls];
      const std::vector<float> xyz = read_pts(e.pts);
      const std::vector<int32_t> seg = read_seg(e.seg, c.num_parts);
      const int64_t n = static_cast<int64_t>(xyz.size() / 3);
      HFTA_CHECK(static_cast<int64_t>(seg.size()) == n,
                 "ShapeNet part label file '{}' has {} labels but its point file '{}' has {} "
                 "points: expected one label per point",
                 e.seg, seg.size(), e.pts, n);
      // Without replacement: the first L draws of a Fisher-Yates shuffle.
      RngStream rng(seed, static_cast<uint64_t>(i));
      std::vector<int64_t> choice(static_cast<size_t>(L));
      if (n >= L) {
        std::vector<int64_t> idx(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) idx[j] = j;
        for (int64_t j = 0; j < L; ++j) {
          const int64_t k = j + static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - j)));
          std::swap(idx[j], idx[k]);
          choice[j] = idx[j];
        }
      } else {
        for (auto& j : choice) j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
      }
      float* dst = out.images.data() + i * L * 3;
      int32_t* parts = out.part_labels.data() + i * L;
      for (int64_t j = 0; j < L; ++j) {
        std::copy_n(xyz.data() + choice[j] * 3, 3, dst + j * 3);
        parts[j] = c.first_part + seg[choice[j]] - 1;
      }
      normalize_to_unit_sphere(std::span<float>(dst, static_cast<size_t>(L * 3)));
      out.labels[i] = e.cls;
    } catch (const std::exception& ex) {
      errors[i] = ex.what();
    }
  });
  for (const auto& message : errors)
    if (!message.empty()) throw Error(message);
  return out;
}

}  // namespace hfta
