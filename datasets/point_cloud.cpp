#include "datasets/point_cloud.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hfta {

void PointCloudSet::check() const {
  Dataset::check();
  HFTA_CHECK(sample_shape.rank() == 2 && sample_shape[1] == 3,
             "point cloud set '{}' has sample shape {}, expected [L, 3]", name, sample_shape.str());
  HFTA_CHECK(static_cast<int64_t>(part_labels.size()) == size * points(),
             "point cloud set '{}' holds {} part labels, expected {} clouds x {} points", name,
             part_labels.size(), size, points());
  HFTA_CHECK(static_cast<int>(parts_of_class.size()) == num_classes &&
                 static_cast<int>(class_names.size()) == num_classes,
             "point cloud set '{}' has {} classes but {} part lists and {} class names", name,
             num_classes, parts_of_class.size(), class_names.size());
  std::vector<int32_t> owner(static_cast<size_t>(std::max(num_parts, 0)), -1);
  for (int c = 0; c < num_classes; ++c) {
    HFTA_CHECK(!parts_of_class[c].empty(), "point cloud set '{}': class '{}' has no parts", name,
               class_names[c]);
    for (int32_t p : parts_of_class[c]) {
      HFTA_CHECK(p >= 0 && p < num_parts && owner[p] == -1,
                 "point cloud set '{}': class '{}' lists part {}, which is outside [0, {}) or "
                 "belongs to another class",
                 name, class_names[c], p, num_parts);
      owner[p] = c;
    }
  }
  for (int p = 0; p < num_parts; ++p)
    HFTA_CHECK(owner[p] != -1, "point cloud set '{}': part {} belongs to no class", name, p);
  for (int64_t i = 0; i < size; ++i) {
    const int32_t* parts_i = parts(i);
    for (int64_t j = 0; j < points(); ++j) {
      const int32_t p = parts_i[j];
      HFTA_CHECK(p >= 0 && p < num_parts && owner[p] == labels[i],
                 "point cloud set '{}': cloud {} (class '{}') has part label {} at point {}, "
                 "expected one of {}",
                 name, i, class_names[labels[i]], p, j, fmt::join(parts_of_class[labels[i]], ","));
    }
  }
}

PointCloudSet take_first(const PointCloudSet& data, int64_t n) {
  PointCloudSet out;
  static_cast<Dataset&>(out) = take_first(static_cast<const Dataset&>(data), n);
  out.part_labels.assign(data.part_labels.begin(),
                         data.part_labels.begin() + out.size * data.points());
  out.num_parts = data.num_parts;
  out.class_names = data.class_names;
  out.parts_of_class = data.parts_of_class;
  return out;
}

Dataset with_part_labels(const PointCloudSet& set) {
  Dataset out = static_cast<const Dataset&>(set);
  out.labels = set.part_labels;
  out.labels_per_sample = set.points();
  out.num_classes = set.num_parts;
  return out;
}

void normalize_to_unit_sphere(std::span<float> xyz) {
  const size_t n = xyz.size() / 3;
  if (n == 0) return;
  double mean[3] = {0, 0, 0};
  for (size_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) mean[d] += xyz[3 * i + d];
  for (double& m : mean) m /= static_cast<double>(n);
  double max_sq = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double sq = 0.0;
    for (int d = 0; d < 3; ++d) {
      const double v = xyz[3 * i + d] - mean[d];
      sq += v * v;
    }
    max_sq = std::max(max_sq, sq);
  }
  const double scale = max_sq > 0.0 ? 1.0 / std::sqrt(max_sq) : 1.0;
  for (size_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d)
      xyz[3 * i + d] = static_cast<float>((xyz[3 * i + d] - mean[d]) * scale);
}

int64_t gather_part_labels(const PointCloudSet& set, const Loader& loader, int64_t rows,
                           const IndexView& out) {
  HFTA_CHECK(&loader.dataset() == static_cast<const Dataset*>(&set),
             "gather_part_labels: the loader reads '{}', not the point cloud set '{}': pass the "
             "set the loader was made from",
             loader.dataset().name, set.name);
  const int64_t N = loader.options().batch_size, L = set.points();
  check_shape(out, Shape{N, L}, "part label buffer");
  HFTA_CHECK(rows >= 0 && rows <= N, "gather_part_labels: {} rows for a batch of {}", rows, N);
  if (rows == 0) return 0;
  // next() has advanced past the batch it served.
  const int64_t first = (loader.batch_index() - 1) * N;
  HFTA_CHECK(loader.batch_index() >= 1 && first + rows <= set.size,
             "gather_part_labels: call it right after a Loader::next() that served {} rows", rows);
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(set.parts(loader.order()[first + r]), L, out.data + r * L);
  return rows;
}

double shape_iou(std::span<const int32_t> pred, std::span<const int32_t> truth,
                 const std::vector<int32_t>& parts_of_class) {
  HFTA_CHECK(pred.size() == truth.size(),
             "shape_iou: {} predicted labels for {} true labels, expected one of each per point",
             pred.size(), truth.size());
  HFTA_CHECK(!parts_of_class.empty(), "shape_iou: the shape's class has no parts");
  double sum = 0.0;
  for (int32_t p : parts_of_class) {
    int64_t inter = 0, uni = 0;
    for (size_t j = 0; j < pred.size(); ++j) {
      const bool a = pred[j] == p, b = truth[j] == p;
      inter += a && b;
      uni += a || b;
    }
    sum += uni == 0 ? 1.0 : static_cast<double>(inter) / static_cast<double>(uni);
  }
  return sum / static_cast<double>(parts_of_class.size());
}

void predict_class_parts(std::span<const float> logits, int64_t num_parts,
                         const std::vector<int32_t>& parts_of_class, std::span<int32_t> pred) {
  HFTA_CHECK(num_parts >= 1 && logits.size() == pred.size() * static_cast<size_t>(num_parts),
             "predict_class_parts: {} logits for {} points x {} parts", logits.size(), pred.size(),
             num_parts);
  HFTA_CHECK(!parts_of_class.empty(), "predict_class_parts: the shape's class has no parts");
  for (int32_t p : parts_of_class)
    HFTA_CHECK(p >= 0 && p < num_parts, "predict_class_parts: part {} outside [0, {})", p,
               num_parts);
  for (size_t j = 0; j < pred.size(); ++j) {
    const float* row = logits.data() + j * num_parts;
    int32_t best = parts_of_class[0];
    for (int32_t p : parts_of_class)
      if (row[p] > row[best]) best = p;
    pred[j] = best;
  }
}

IouMeter::IouMeter(const std::vector<std::vector<int32_t>>& parts_of_class)
    : parts_of_class_(parts_of_class),
      sum_(parts_of_class.size(), 0.0),
      count_(parts_of_class.size(), 0) {}

double IouMeter::add(int32_t cls, std::span<const int32_t> pred, std::span<const int32_t> truth) {
  HFTA_CHECK(cls >= 0 && cls < static_cast<int32_t>(parts_of_class_.size()),
             "IouMeter: class {} outside [0, {})", cls, parts_of_class_.size());
  const double iou = shape_iou(pred, truth, parts_of_class_[cls]);
  sum_[cls] += iou;
  ++count_[cls];
  total_ += iou;
  ++shapes_;
  return iou;
}

void IouMeter::reset() {
  std::fill(sum_.begin(), sum_.end(), 0.0);
  std::fill(count_.begin(), count_.end(), 0);
  total_ = 0.0;
  shapes_ = 0;
}

double IouMeter::instance_miou() const {
  return shapes_ == 0 ? std::numeric_limits<double>::quiet_NaN()
                      : total_ / static_cast<double>(shapes_);
}

double IouMeter::class_iou(int32_t c) const {
  return count_.at(c) == 0 ? std::numeric_limits<double>::quiet_NaN()
                           : sum_[c] / static_cast<double>(count_[c]);
}

double IouMeter::class_miou() const {
  double sum = 0.0;
  int seen = 0;
  for (size_t c = 0; c < sum_.size(); ++c)
    if (count_[c] > 0) sum += class_iou(static_cast<int32_t>(c)), ++seen;
  return seen == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / seen;
}

}  // namespace hfta
