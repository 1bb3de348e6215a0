// ShapeNet part segmentation (Yi et al. 2016), as PointNet reads it: the directory
// shapenetcore_partanno_segmentation_benchmark_v0 (from
// https://shapenet.cs.stanford.edu/ericyi/shapenetcore_partanno_segmentation_benchmark_v0.zip),
// 16 classes, 50 parts, 12137 + 1870 training/validation shapes and 2874 test shapes.
//
//   DIR/synsetoffset2category.txt            one class per line: "Airplane\t02691156"
//   DIR/<synset>/points/<id>.pts              one point per line: "x y z"
//   DIR/<synset>/points_label/<id>.seg        one part label per line, 1-based within the class
//   DIR/train_test_split/shuffled_{train,val,test}_file_list.json
//                                             JSON arrays of "shape_data/<synset>/<id>"
//
// Classes are numbered in the category file's order. Each class's parts are consecutive global
// ids in that order (PointNet's seg_classes: Airplane 0-3, Bag 4-5, Cap 6-7, ...), and a raw
// label k of class c becomes first_part[c] + k - 1. The number of parts of a class comes from the
// standard table (kShapeNetPartCounts, keyed by class name) so that every split and every subset
// of the data numbers parts the same way; a class name outside the table gets the largest label
// found in its .seg files over all three lists.
//
// Splits: Split::kTrain is the train list followed by the val list (PointNet trains on both),
// Split::kTest the test list. List entries whose synset is not in the category file are skipped,
// so deleting lines from synsetoffset2category.txt selects classes.
//
// Each shape is resampled once, at load, to `npoints` points: a seeded choice without replacement
// when the shape has at least npoints points, with replacement when it has fewer (the stream of
// shape i depends on (seed, split, i) only). Then it is centered at its mean and scaled into the
// unit sphere, as PointNet's loader does. (PointNet redraws the choice every epoch; here it is
// drawn once, so runs are reproducible and an epoch reads no files.)
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "datasets/point_cloud.h"

namespace hfta {

// Parts per class of the standard 16 classes, in the category file's order (sum 50).
inline const std::vector<std::pair<std::string, int>> kShapeNetPartCounts = {
    {"Airplane", 4}, {"Bag", 2},      {"Cap", 2},        {"Car", 4},
    {"Chair", 4},    {"Earphone", 3}, {"Guitar", 3},     {"Knife", 2},
    {"Lamp", 4},     {"Laptop", 2},   {"Motorbike", 6},  {"Mug", 2},
    {"Pistol", 3},   {"Rocket", 3},   {"Skateboard", 3}, {"Table", 3}};

struct ShapeNetPartOptions {
  int64_t npoints = 2500;  // L
  uint64_t seed = 0;
};

// Reads the split from `dir`. Throws hfta::Error naming the file (and line, or list entry) for:
// a missing directory, category file or split list; a malformed category line; a list that is not
// a JSON array of "shape_data/<synset>/<id>" strings; a list entry whose .pts or .seg is missing;
// a malformed .pts line; a .seg line that is not an integer label of the class (for a class
// outside kShapeNetPartCounts, one from 1 to 1024); a .seg whose count differs from its .pts; an
// empty .pts; a class of the category file with no shape in the split; a file larger than the
// memory available.
PointCloudSet load_shapenet_part(const std::string& dir, Split split,
                                 const ShapeNetPartOptions& options = {});

}  // namespace hfta
