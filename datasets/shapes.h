// `shapes`: a procedural point-cloud set for PointNet classification and part segmentation that
// needs no download. Ten classes of simple objects built from labelled parts (y is up, as in
// ShapeNet); part ids are global and consecutive per class, as ShapeNet part numbers them:
//
//   class      parts (global ids)
//   table      top 0, leg 1                  four legs under a slab
//   chair      seat 2, back 3, leg 4         a table's shape with a back rest
//   lamp       base 5, pole 6, shade 7       a disc, a thin pole, an open conical shade
//   mug        body 8, handle 9              an open cylinder with a half-ring handle
//   cone       side 10, base 11
//   cylinder   side 12, caps 13
//   box        sides 14, lid 15              lid = top and bottom faces
//   sphere     upper 16, lower 17            hemispheres
//   torus      ring 18                       lying flat
//   airplane   fuselage 19, wing 20, tail 21
//
// Sample i: its class uniform over the ten; points drawn on the canonical object's surfaces with
// probability proportional to area; then an anisotropic scale (each axis uniform in
// [min_scale, max_scale], applied to the points, so density varies by at most that ratio, as
// scaling augmentation does on real scans), a rotation by a uniform angle about the up axis,
// Gaussian jitter of std jitter_std per coordinate, and the ShapeNet loader's normalization
// (centered, scaled into the unit sphere) so that size tells nothing about the class. Sample i
// depends only on (seed, split, i), whatever the thread count; the test split is drawn from its
// own stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/point_cloud.h"

namespace hfta {

struct ShapesOptions {
  float jitter_std = 0.01f;
  float min_scale = 0.7f, max_scale = 1.4f;
};

inline constexpr int kShapesClasses = 10;
inline constexpr int kShapesParts = 22;

// `size` clouds of `npoints` points each. Throws hfta::Error on a size or npoints below 1 or bad
// options.
PointCloudSet make_shapes(Split split, int64_t size, int64_t npoints, uint64_t seed,
                          const ShapesOptions& options = {});

// The part names of class c, in global id order (for logs and plots).
std::vector<std::string> shapes_part_names(int c);

}  // namespace hfta
