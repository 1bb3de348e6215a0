// Point clouds: ShapeNet part trees written here read back with the right classes, global part
// ids, resampling and normalization, and every kind of bad tree names its file; the procedural
// `shapes` set is reproducible, well labelled and separable by shape; shape IoU matches
// hand-worked examples.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "datasets/loader.h"
#include "datasets/point_cloud.h"
#include "datasets/shapenet_part.h"
#include "datasets/shapes.h"
#include "test_files.h"
#include "test_util.h"

namespace hfta {
using test::expect_error_containing_all;
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// A small ShapeNet part tree.

constexpr const char* kAirplane = "02691156";
constexpr const char* kBag = "02773838";

struct Shape3 {
  std::string synset, id;
  std::vector<std::array<float, 3>> points;
  std::vector<int> labels;  // raw, 1-based
};

// n points of shape `k` with raw labels cycling over 1..parts; the point's x encodes its label
// and its index so that a test can tell which original point a resampled one came from.
Shape3 make_shape(const std::string& synset, int k, int n, int parts) {
  Shape3 s{synset, fmt::format("shape{}", k), {}, {}};
  for (int j = 0; j < n; ++j) {
    const int label = 1 + j % parts;
    s.points.push_back(
        {static_cast<float>(j), 0.5f * static_cast<float>(k + j % 3), static_cast<float>(label)});
    s.labels.push_back(label);
  }
  return s;
}

std::string entry(const Shape3& s) { return fmt::format("\"shape_data/{}/{}\"", s.synset, s.id); }

struct Tree {
  fs::path dir;
  std::vector<Shape3> train, val, test;
  std::string categories = std::string("Airplane\t") + kAirplane + "\nBag\t" + kBag + "\n";

  void write_shape(const Shape3& s) const {
    fs::create_directories(dir / s.synset / "points");
    fs::create_directories(dir / s.synset / "points_label");
    std::ofstream pts(dir / s.synset / "points" / (s.id + ".pts"));
    for (const auto& p : s.points) pts << p[0] << ' ' << p[1] << ' ' << p[2] << '\n';
    std::ofstream seg(dir / s.synset / "points_label" / (s.id + ".seg"));
    for (int l : s.labels) seg << l << '\n';
  }
  void write_list(const std::string& name, const std::vector<Shape3>& shapes) const {
    std::vector<std::string> entries;
    for (const auto& s : shapes) entries.push_back(entry(s));
    write(fs::path("train_test_split") / name,
          "[" + fmt::format("{}", fmt::join(entries, ", ")) + "]");
  }
  void write(const fs::path& rel, const std::string& text) const {
    fs::create_directories((dir / rel).parent_path());
    std::ofstream(dir / rel) << text;
  }
  void write_all() const {
    write("synsetoffset2category.txt", categories);
    for (const auto* list : {&train, &val, &test})
      for (const auto& s : *list) write_shape(s);
    write_list("shuffled_train_file_list.json", train);
    write_list("shuffled_val_file_list.json", val);
    write_list("shuffled_test_file_list.json", test);
  }
};

// Airplane (4 parts) and Bag (2 parts): 3 + 1 training, 1 + 1 validation, 1 + 1 test shapes.
Tree standard_tree(const fs::path& dir, int n = 8) {
  Tree t{dir};
  t.train = {make_shape(kAirplane, 0, n, 4), make_shape(kBag, 1, n, 2),
             make_shape(kAirplane, 2, n, 4), make_shape(kAirplane, 3, n, 4)};
  t.val = {make_shape(kBag, 4, n, 2), make_shape(kAirplane, 5, n, 4)};
  t.test = {make_shape(kBag, 6, n, 2), make_shape(kAirplane, 7, n, 4)};
  t.write_all();
  return t;
}

// The original shape's points after PointNet's normalization, for the chosen indices.
std::vector<float> normalized(const Shape3& s, const std::vector<int>& choice) {
  std::vector<float> xyz;
  for (int j : choice) xyz.insert(xyz.end(), s.points[j].begin(), s.points[j].end());
  normalize_to_unit_sphere(xyz);
  return xyz;
}

void expect_unit_sphere(const float* xyz, int64_t n, const std::string& what) {
  double mean[3] = {0, 0, 0}, max_norm = 0;
  for (int64_t j = 0; j < n; ++j)
    for (int d = 0; d < 3; ++d) mean[d] += xyz[3 * j + d] / static_cast<double>(n);
  for (int64_t j = 0; j < n; ++j)
    max_norm = std::max(
        max_norm, std::hypot(double(xyz[3 * j]), double(xyz[3 * j + 1]), double(xyz[3 * j + 2])));
  for (double m : mean) EXPECT_NEAR(m, 0.0, 1e-5) << what;
  EXPECT_NEAR(max_norm, 1.0, 1e-5) << what;
}

TEST(DatasetShapeNetPart, ReadsSplitsWithGlobalPartIds) {
  test::TempDir dir("shapenet_reads");
  const Tree t = standard_tree(dir.path);
  // npoints = the shapes' size: the choice without replacement is a permutation.
  const PointCloudSet train = load_shapenet_part(dir.str(), Split::kTrain, {.npoints = 8});
  EXPECT_EQ(train.name, "shapenet-part-train");
  ASSERT_EQ(train.size, 6);  // train list then val list
  EXPECT_EQ(train.sample_shape, (Shape{8, 3}));
  EXPECT_EQ(train.num_classes, 2);
  EXPECT_EQ(train.class_names, (std::vector<std::string>{"Airplane", "Bag"}));
  EXPECT_EQ(train.num_parts, 6);
  EXPECT_EQ(train.parts_of_class, (std::vector<std::vector<int32_t>>{{0, 1, 2, 3}, {4, 5}}));
  EXPECT_NO_THROW(train.check());
  EXPECT_EQ(train.labels, (std::vector<int32_t>{0, 1, 0, 0, 1, 0}));
  std::vector<Shape3> shapes = t.train;
  shapes.insert(shapes.end(), t.val.begin(), t.val.end());
  for (int64_t i = 0; i < train.size; ++i) {
    const Shape3& s = shapes[i];
    const int first = train.labels[i] == 0 ? 0 : 4;
    // Every original point appears once; its part label goes with it (z holds the raw label).
    std::vector<int> all(8);
    for (int j = 0; j < 8; ++j) all[j] = j;
    const std::vector<float> expected = normalized(s, all);
    std::set<int> seen;
    for (int64_t j = 0; j < 8; ++j) {
      const float* p = train.sample(i) + 3 * j;
      int match = -1;
      for (int k = 0; k < 8; ++k)
        if (std::fabs(p[0] - expected[3 * k]) < 1e-6 &&
            std::fabs(p[1] - expected[3 * k + 1]) < 1e-6 &&
            std::fabs(p[2] - expected[3 * k + 2]) < 1e-6)
          match = k;
      ASSERT_GE(match, 0) << "cloud " << i << " point " << j << " is no original point";
      seen.insert(match);
      EXPECT_EQ(train.parts(i)[j], first + s.labels[match] - 1) << "cloud " << i << " point " << j;
    }
    EXPECT_EQ(seen.size(), 8u) << "cloud " << i;
    expect_unit_sphere(train.sample(i), 8, fmt::format("cloud {}", i));
  }
  const PointCloudSet test = load_shapenet_part(dir.str(), Split::kTest, {.npoints = 8});
  EXPECT_EQ(test.name, "shapenet-part-test");
  EXPECT_EQ(test.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(test.parts_of_class, train.parts_of_class);
}

// Parts are numbered in the category file's order, whatever the class names.
TEST(DatasetShapeNetPart, PartIdsFollowCategoryFileOrder) {
  test::TempDir dir("shapenet_order");
  Tree t{dir.path};
  t.categories = std::string("Bag ") + kBag + "\r\n\nAirplane " + kAirplane + "\n";
  t.train = {make_shape(kAirplane, 0, 6, 4), make_shape(kBag, 1, 6, 2)};
  t.test = t.train;
  t.write_all();
  const PointCloudSet d = load_shapenet_part(dir.str(), Split::kTrain, {.npoints = 6});
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"Bag", "Airplane"}));
  EXPECT_EQ(d.parts_of_class, (std::vector<std::vector<int32_t>>{{0, 1}, {2, 3, 4, 5}}));
  EXPECT_EQ(d.labels, (std::vector<int32_t>{1, 0}));
  for (int64_t j = 0; j < 6; ++j) {
    EXPECT_GE(d.parts(0)[j], 2);
    EXPECT_LE(d.parts(1)[j], 1);
  }
}

// The standard table fixes a known class's part count even when the data uses fewer labels; a
// class outside the table takes the largest label over all three lists.
TEST(DatasetShapeNetPart, PartCountsFromTableOrData) {
  test::TempDir dir("shapenet_counts");
  Tree t{dir.path};
  t.categories = std::string("Airplane\t") + kAirplane + "\nWidget\t99999999\n";
  t.train = {make_shape(kAirplane, 0, 6, 2), make_shape("99999999", 1, 6, 2)};
  t.test = {make_shape("99999999", 2, 6, 3), make_shape(kAirplane, 3, 6, 1)};
  t.write_all();
  for (Split split : {Split::kTrain, Split::kTest}) {
    const PointCloudSet d = load_shapenet_part(dir.str(), split, {.npoints = 6});
    EXPECT_EQ(d.num_parts, 7);
    EXPECT_EQ(d.parts_of_class, (std::vector<std::vector<int32_t>>{{0, 1, 2, 3}, {4, 5, 6}}));
    EXPECT_NO_THROW(d.check());
  }
  int sum = 0;
  for (const auto& [name, count] : kShapeNetPartCounts) sum += count;
  EXPECT_EQ(sum, 50);
  EXPECT_EQ(kShapeNetPartCounts.size(), 16u);
}

TEST(DatasetShapeNetPart, ResamplingIsSeededWithReplacementWhenFewer) {
  test::TempDir dir("shapenet_resample");
  standard_tree(dir.path, 5);
  const ShapeNetPartOptions opts{.npoints = 12, .seed = 3};
  const PointCloudSet a = load_shapenet_part(dir.str(), Split::kTrain, opts);
  const PointCloudSet b = load_shapenet_part(dir.str(), Split::kTrain, opts);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.part_labels, b.part_labels);
  const PointCloudSet c = load_shapenet_part(dir.str(), Split::kTrain, {.npoints = 12, .seed = 4});
  EXPECT_NE(a.images, c.images);
  EXPECT_NO_THROW(a.check());
  for (int64_t i = 0; i < a.size; ++i) {
    // 12 draws from 5 points: repeats, at most 5 distinct points, a point keeps its label.
    std::map<std::array<float, 3>, int32_t> label_of;
    for (int64_t j = 0; j < 12; ++j) {
      const float* p = a.sample(i) + 3 * j;
      const auto [it, fresh] = label_of.insert({{p[0], p[1], p[2]}, a.parts(i)[j]});
      EXPECT_EQ(it->second, a.parts(i)[j]) << "cloud " << i << " point " << j;
    }
    EXPECT_LE(label_of.size(), 5u);
    expect_unit_sphere(a.sample(i), 12, fmt::format("cloud {}", i));
  }
  // Fewer points than the shapes hold: a subset without repeats.
  const PointCloudSet d = load_shapenet_part(dir.str(), Split::kTest, {.npoints = 4});
  for (int64_t i = 0; i < d.size; ++i) {
    std::set<std::array<float, 3>> distinct;
    for (int64_t j = 0; j < 4; ++j)
      distinct.insert({d.sample(i)[3 * j], d.sample(i)[3 * j + 1], d.sample(i)[3 * j + 2]});
    EXPECT_EQ(distinct.size(), 4u) << "cloud " << i;
  }
}

TEST(DatasetShapeNetPart, LoaderBatchesWithPartLabels) {
  test::TempDir dir("shapenet_loader");
  standard_tree(dir.path);
  const PointCloudSet d = load_shapenet_part(dir.str(), Split::kTrain, {.npoints = 8});
  Loader loader(d, {.batch_size = 4, .seed = 9, .drop_last = false});
  Batch batch = loader.make_batch();
  std::vector<int32_t> parts(4 * 8, -7);
  IndexView out(parts.data(), Shape{4, 8});
  int64_t seen = 0;
  while (loader.next(batch)) {
    ASSERT_EQ(gather_part_labels(d, loader, batch.rows, out), batch.rows);
    for (int64_t r = 0; r < batch.rows; ++r) {
      // Find the sample by its points, then compare its part labels.
      int64_t found = -1;
      for (int64_t i = 0; i < d.size; ++i)
        if (std::equal(d.sample(i), d.sample(i) + 24, batch.image_data.data() + r * 24)) found = i;
      ASSERT_GE(found, 0);
      EXPECT_EQ(batch.label_data[r], d.labels[found]);
      EXPECT_TRUE(std::equal(parts.begin() + r * 8, parts.begin() + r * 8 + 8, d.parts(found)));
    }
    seen += batch.rows;
  }
  EXPECT_EQ(seen, d.size);
  const PointCloudSet other = take_first(d, 3);
  EXPECT_EQ(other.size, 3);
  EXPECT_NO_THROW(other.check());
  expect_error_containing_all([&] { gather_part_labels(other, loader, 2, out); },
                              {"loader reads 'shapenet-part-train'", "not the point cloud set"});
}

TEST(DatasetShapeNetPart, ErrorsNameFileAndLine) {
  test::TempDir dir("shapenet_errors");
  const auto load = [&](Split split = Split::kTrain) {
    return load_shapenet_part(dir.str(), split, {.npoints = 8});
  };
  const fs::path pts = dir.path / kAirplane / "points" / "shape2.pts";
  const fs::path seg = dir.path / kAirplane / "points_label" / "shape2.seg";
  const std::string nowhere = (dir.path / "nowhere").string();
  expect_error_containing_all(
      [&] { load_shapenet_part(nowhere, Split::kTrain); },
      {nowhere, "does not exist", "shapenetcore_partanno_segmentation_benchmark_v0"});

  Tree t = standard_tree(dir.path);
  // A malformed .pts line.
  t.write(fs::relative(pts, dir.path), "1 2 3\n4 five 6\n");
  expect_error_containing_all(load, {pts.string(), "line 2", "three finite numbers", "'4 five 6'"});
  t.write(fs::relative(pts, dir.path), "+1 2e-1 -3\n4 5\n");
  expect_error_containing_all(load, {pts.string(), "line 2", "'4 5'"});
  t.write(fs::relative(pts, dir.path), "");
  expect_error_containing_all(load, {pts.string(), "no point"});
  // A .seg with another count than its .pts.
  t.write_shape(t.train[2]);
  t.write(fs::relative(seg, dir.path), "1\n2\n3\n");
  expect_error_containing_all(load, {seg.string(), "3 labels", pts.string(), "8 points"});
  // A label outside the class's parts, or not a number.
  t.write(fs::relative(seg, dir.path), "1\n2\n3\n4\n5\n1\n1\n1\n");
  expect_error_containing_all(load, {seg.string(), "line 5", "from 1 to 4", "'5'"});
  t.write(fs::relative(seg, dir.path), "1\n2\n3\n0\n1\n1\n1\n1\n");
  expect_error_containing_all(load, {seg.string(), "line 4", "'0'"});
  t.write_shape(t.train[2]);
  EXPECT_EQ(load().size, 6);

  // A list entry whose files are missing: both named, with the list and the entry.
  fs::remove(seg);
  expect_error_containing_all(load, {"shuffled_train_file_list.json' entry 2",
                                     "shape_data/02691156/shape2", seg.string(), "is missing"});
  fs::remove(pts);
  expect_error_containing_all(load, {"files are missing", pts.string(), seg.string()});
  t.write_shape(t.train[2]);

  // Missing, malformed split files and entries.
  const fs::path val = dir.path / "train_test_split" / "shuffled_val_file_list.json";
  fs::remove(val);
  expect_error_containing_all(load, {val.string(), "is missing",
                                     "shuffled_train_file_list.json and "
                                     "shuffled_val_file_list.json"});
  EXPECT_EQ(load(Split::kTest).size, 2);
  t.write(fs::relative(val, dir.path), "[\"shape_data/02691156/shape5\"");
  expect_error_containing_all(load, {val.string(), "not valid JSON"});
  t.write(fs::relative(val, dir.path), "{\"a\": 1}");
  expect_error_containing_all(load, {val.string(), "JSON object", "expected an array"});
  t.write(fs::relative(val, dir.path), "[\"shape_data/02691156/shape5\", \"02691156/shape4\"]");
  expect_error_containing_all(
      load, {val.string(), "entry 1", "\"02691156/shape4\"", "shape_data/<synset>/<id>"});
  t.write(fs::relative(val, dir.path), "[\"shape_data/02691156/shape5\", 7]");
  expect_error_containing_all(load, {val.string(), "entry 1 is 7"});
  t.write_list("shuffled_val_file_list.json", t.val);

  // An empty class: in the category file, absent from the split's lists.
  t.write_list("shuffled_test_file_list.json", {t.test[1]});
  expect_error_containing_all(
      [&] { load(Split::kTest); },
      {"class 'Bag'", kBag, "no shape in the test split", "synsetoffset2category.txt"});
  // Leaving the class out of the category file selects the other classes.
  t.write("synsetoffset2category.txt", std::string("Airplane\t") + kAirplane + "\n");
  const PointCloudSet airplanes = load(Split::kTest);
  EXPECT_EQ(airplanes.size, 1);
  EXPECT_EQ(airplanes.num_parts, 4);

  // Category file: malformed line, duplicate, empty, missing.
  const fs::path cat = dir.path / "synsetoffset2category.txt";
  t.write("synsetoffset2category.txt", std::string("Airplane\t") + kAirplane + "\nBag\n");
  expect_error_containing_all(load, {cat.string(), "line 2", "<class name> <synset id>", "'Bag'"});
  t.write("synsetoffset2category.txt",
          std::string("Airplane\t") + kAirplane + "\nPlane\t" + kAirplane + "\n");
  expect_error_containing_all(load, {cat.string(), "line 2", "listed twice"});
  t.write("synsetoffset2category.txt", "\n");
  expect_error_containing_all(load, {cat.string(), "lists no class"});
  fs::remove(cat);
  expect_error_containing_all(load, {cat.string(), "is missing", "shapenetcore_partanno"});
  expect_error_containing_all([&] { load_shapenet_part(dir.str(), Split::kTrain, {.npoints = 0}); },
                              {"npoints", "got 0"});
}

// ---------------------------------------------------------------------------------------------
// Shape IoU, by hand.

TEST(PointCloudIou, HandWorkedExamples) {
  const std::vector<int32_t> parts = {4, 5, 6};
  // Truth 4 4 5 5, prediction 4 5 5 5: part 4: 1/2, part 5: 2/3, part 6 absent in both: 1.
  EXPECT_NEAR(shape_iou(std::vector<int32_t>{4, 5, 5, 5}, std::vector<int32_t>{4, 4, 5, 5}, parts),
              (0.5 + 2.0 / 3.0 + 1.0) / 3.0, 1e-12);
  // Perfect: 1. All wrong among two parts: parts 4 and 5 score 0, part 6 scores 1.
  EXPECT_EQ(shape_iou(std::vector<int32_t>{4, 5, 6}, std::vector<int32_t>{4, 5, 6}, parts), 1.0);
  EXPECT_NEAR(shape_iou(std::vector<int32_t>{5, 5}, std::vector<int32_t>{4, 4}, parts), 1.0 / 3.0,
              1e-12);
  // A prediction outside the class's parts is a miss for the true part: part 4 scores 1/2.
  EXPECT_NEAR(shape_iou(std::vector<int32_t>{9, 4}, std::vector<int32_t>{4, 4}, {4}), 0.5, 1e-12);
  expect_error_containing_all(
      [] {
        shape_iou(std::vector<int32_t>{1}, std::vector<int32_t>{1, 2}, {1});
      },
      {"1 predicted labels for 2 true labels"});
  expect_error_containing_all(
      [] { shape_iou(std::vector<int32_t>{1}, std::vector<int32_t>{1}, {}); }, {"no parts"});

  // Predictions restricted to the class's parts: logits [3 points, 6 parts].
  const std::vector<float> logits = {9, 1, 2, 0, 0, 0,   // best overall 0, best of {1,2} is 2
                                     0, 5, 4, 0, 0, 0,   // 1
                                     0, 0, 0, 0, 0, 0};  // tie: the first of the class's parts
  std::vector<int32_t> pred(3);
  predict_class_parts(logits, 6, std::vector<int32_t>{1, 2}, pred);
  EXPECT_EQ(pred, (std::vector<int32_t>{2, 1, 1}));
  expect_error_containing_all(
      [&] { predict_class_parts(logits, 5, std::vector<int32_t>{1}, pred); },
      {"18 logits for 3 points x 5 parts"});

  // The meter: class 0 (parts {0, 1}) has IoUs 1 and 0.5, class 1 (part {2}) has 0.
  IouMeter meter({{0, 1}, {2}});
  EXPECT_EQ(meter.add(0, std::vector<int32_t>{0, 1}, std::vector<int32_t>{0, 1}), 1.0);
  EXPECT_NEAR(meter.add(0, std::vector<int32_t>{0, 0}, std::vector<int32_t>{0, 1}), 0.25, 1e-12);
  EXPECT_EQ(meter.add(1, std::vector<int32_t>{0}, std::vector<int32_t>{2}), 0.0);
  EXPECT_EQ(meter.shapes(), 3);
  EXPECT_NEAR(meter.instance_miou(), 1.25 / 3.0, 1e-12);
  EXPECT_NEAR(meter.class_iou(0), 0.625, 1e-12);
  EXPECT_NEAR(meter.class_miou(), 0.625 / 2.0, 1e-12);
  meter.reset();
  EXPECT_TRUE(std::isnan(meter.instance_miou()));
  expect_error_containing_all(
      [&] { meter.add(2, std::vector<int32_t>{0}, std::vector<int32_t>{0}); },
      {"class 2 outside [0, 2)"});
}

TEST(PointCloudIou, NormalizeToUnitSphere) {
  std::vector<float> xyz = {1, 1, 1, 3, 1, 1, 2, 4, 1};  // mean (2, 2, 1)
  normalize_to_unit_sphere(xyz);
  // Offsets (-1,-1,0), (1,-1,0), (0,2,0): the farthest at distance 2.
  const std::vector<float> expected = {-0.5f, -0.5f, 0, 0.5f, -0.5f, 0, 0, 1, 0};
  for (size_t k = 0; k < xyz.size(); ++k) EXPECT_FLOAT_EQ(xyz[k], expected[k]) << k;
  std::vector<float> same = {2, 3, 4, 2, 3, 4};
  normalize_to_unit_sphere(same);
  for (float v : same) EXPECT_EQ(v, 0.0f);
}

// ---------------------------------------------------------------------------------------------
// The procedural shapes set.

TEST(DatasetShapes, ReproducibleAndWellLabelled) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const PointCloudSet a = make_shapes(Split::kTrain, 300, 256, seed);
  EXPECT_NO_THROW(a.check());
  EXPECT_EQ(a.sample_shape, (Shape{256, 3}));
  EXPECT_EQ(a.num_classes, kShapesClasses);
  EXPECT_EQ(a.num_parts, kShapesParts);
  // The same seed gives the same set, whatever the thread count.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const PointCloudSet b = make_shapes(Split::kTrain, 300, 256, seed);
  omp_set_num_threads(threads);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.part_labels, b.part_labels);
  EXPECT_NE(a.images, make_shapes(Split::kTrain, 300, 256, seed + 1).images);
  const PointCloudSet test = make_shapes(Split::kTest, 300, 256, seed);
  EXPECT_NE(a.images, test.images);
  EXPECT_EQ(test.name, fmt::format("shapes-test-seed{}", seed));
  // A smaller set is a prefix of a larger one.
  const PointCloudSet small = make_shapes(Split::kTrain, 20, 256, seed);
  EXPECT_TRUE(std::equal(small.images.begin(), small.images.end(), a.images.begin()));

  // Every class occurs, with every one of its parts; clouds are normalized.
  std::vector<int> per_class(kShapesClasses, 0);
  std::vector<std::set<int32_t>> parts_seen(kShapesClasses);
  for (int64_t i = 0; i < a.size; ++i) {
    ++per_class[a.labels[i]];
    parts_seen[a.labels[i]].insert(a.parts(i), a.parts(i) + 256);
    expect_unit_sphere(a.sample(i), 256, fmt::format("cloud {}", i));
  }
  int total_parts = 0;
  for (int c = 0; c < kShapesClasses; ++c) {
    EXPECT_GE(per_class[c], 15) << a.class_names[c];
    EXPECT_EQ(parts_seen[c].size(), a.parts_of_class[c].size()) << a.class_names[c];
    EXPECT_EQ(shapes_part_names(c).size(), a.parts_of_class[c].size());
    total_parts += static_cast<int>(shapes_part_names(c).size());
  }
  EXPECT_EQ(total_parts, kShapesParts);
  EXPECT_EQ(shapes_part_names(3), (std::vector<std::string>{"body", "handle"}));
  expect_error_containing_all([] { make_shapes(Split::kTrain, 0, 8, 1); }, {"at least 1 sample"});
  expect_error_containing_all([] { make_shapes(Split::kTrain, 4, 0, 1); }, {"at least 1 point"});
  expect_error_containing_all(
      [] { make_shapes(Split::kTrain, 4, 8, 1, {.min_scale = 2, .max_scale = 1}); },
      {"min_scale <= max_scale"});
}

// Features that ignore the rotation about the up axis: a histogram of (distance from the up axis,
// height) and one of the distance from the center.
std::vector<double> invariant_features(const PointCloudSet& s, int64_t i) {
  constexpr int kBins = 10;
  std::vector<double> h(kBins * kBins + kBins, 0.0);
  const float* p = s.sample(i);
  const int64_t L = s.points();
  for (int64_t j = 0; j < L; ++j) {
    const float x = p[3 * j], y = p[3 * j + 1], z = p[3 * j + 2];
    const int r = std::min(kBins - 1, static_cast<int>(std::sqrt(x * x + z * z) * kBins));
    const int hy = std::clamp(static_cast<int>((y + 1) / 2 * kBins), 0, kBins - 1);
    const int d = std::min(kBins - 1, static_cast<int>(std::sqrt(x * x + y * y + z * z) * kBins));
    h[r * kBins + hy] += 1.0 / L;
    h[kBins * kBins + d] += 1.0 / L;
  }
  return h;
}

// The classes differ by shape, not by size: a nearest-neighbour classifier on rotation-invariant
// histograms (no learning) already tells most test clouds apart, so PointNet has signal to learn.
TEST(DatasetShapes, ClassesAreSeparableByShape) {
  const uint64_t seed = test::seed_for_test();
  HFTA_SEEDED_TRACE(seed);
  const PointCloudSet train = make_shapes(Split::kTrain, 1000, 256, seed);
  const PointCloudSet test = make_shapes(Split::kTest, 300, 256, seed);
  std::vector<std::vector<double>> features;
  for (int64_t i = 0; i < train.size; ++i) features.push_back(invariant_features(train, i));
  int64_t correct = 0;
  for (int64_t i = 0; i < test.size; ++i) {
    const std::vector<double> f = invariant_features(test, i);
    double best = 1e300;
    int32_t label = -1;
    for (int64_t t = 0; t < train.size; ++t) {
      double d = 0;
      for (size_t k = 0; k < f.size(); ++k) d += (f[k] - features[t][k]) * (f[k] - features[t][k]);
      if (d < best) best = d, label = train.labels[t];
    }
    correct += label == test.labels[i];
  }
  EXPECT_GE(static_cast<double>(correct) / static_cast<double>(test.size), 0.9);
}

}  // namespace
}  // namespace hfta
