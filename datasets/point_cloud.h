// Point clouds with per-point part labels (PointNet's classification and part segmentation), and
// the part-segmentation metric.
//
//   L  points per cloud (every cloud of a set has the same L, after resampling)
//   P  part labels over all classes (ShapeNet part: 50); class c owns parts_of_class[c], a run
//      of consecutive global ids in class order (ShapeNet part: Airplane 0-3, Bag 4-5, ...)
//
// A PointCloudSet is a Dataset, so Loader serves its clouds and class labels unchanged:
//   images       [size, L, 3]  float, x y z per point
//   labels       [size]        int32 class in [0, num_classes)
//   part_labels  [size, L]     int32 global part id in parts_of_class[labels[i]]
// gather_part_labels() fills the part labels of the batch a Loader has just served.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/loader.h"

namespace hfta {

struct PointCloudSet : Dataset {
  std::vector<int32_t> part_labels;
  int num_parts = 0;
  std::vector<std::string> class_names;
  std::vector<std::vector<int32_t>> parts_of_class;

  int64_t points() const { return sample_shape[0]; }
  const int32_t* parts(int64_t i) const { return part_labels.data() + i * points(); }
  // Dataset::check(), plus: sample shape [L, 3], one part label per point, every part label one
  // of its class's parts, parts_of_class a partition of [0, num_parts).
  void check() const;
};

// The first n clouds (all of them when n >= size).
PointCloudSet take_first(const PointCloudSet& data, int64_t n);

// The clouds with their part labels as the labels: labels [size, L] (labels_per_sample L),
// num_classes = num_parts. For training part segmentation through a Loader.
Dataset with_part_labels(const PointCloudSet& set);

// Centers the points [n, 3] at their mean and scales them into the unit sphere (the farthest
// point at distance 1), as PointNet's ShapeNet loader does. Points that all coincide are only
// centered.
void normalize_to_unit_sphere(std::span<float> xyz);

// The part labels of the batch that loader.next() has just served from `set`, in the batch's row
// order, into out [N, L] (N = batch size; the first `rows` rows written). Returns rows, 0 when the
// last next() ended the epoch. Throws hfta::Error when the loader reads another dataset.
int64_t gather_part_labels(const PointCloudSet& set, const Loader& loader, int64_t rows,
                           const IndexView& out);

// One shape's IoU as PointNet's part-segmentation evaluation computes it: for each part p of the
// shape's class, |pred == p and truth == p| / |pred == p or truth == p|, or 1 when p occurs in
// neither; the mean over the class's parts. pred and truth hold one label per point.
double shape_iou(std::span<const int32_t> pred, std::span<const int32_t> truth,
                 const std::vector<int32_t>& parts_of_class);

// The predicted part of each of L points: the arg max of its logits [L, P] over the parts of the
// shape's class only (PointNet's evaluation never predicts another class's part).
void predict_class_parts(std::span<const float> logits, int64_t num_parts,
                         const std::vector<int32_t>& parts_of_class, std::span<int32_t> pred);

// Shape IoUs summed per class over an evaluation.
//   instance mIoU: the mean over all shapes;  class mIoU: the mean over classes seen of the mean
//   over that class's shapes (PointNet reports both).
class IouMeter {
 public:
  explicit IouMeter(const std::vector<std::vector<int32_t>>& parts_of_class);
  // Adds one shape of class `cls` and returns its IoU.
  double add(int32_t cls, std::span<const int32_t> pred, std::span<const int32_t> truth);
  void reset();
  int64_t shapes() const { return shapes_; }
  double instance_miou() const;
  double class_miou() const;
  // Mean IoU of class c's shapes; NaN when none was added.
  double class_iou(int32_t c) const;

 private:
  std::vector<std::vector<int32_t>> parts_of_class_;
  std::vector<double> sum_;
  std::vector<int64_t> count_;
  double total_ = 0.0;
  int64_t shapes_ = 0;
};

}  // namespace hfta
