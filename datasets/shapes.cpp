#include "datasets/shapes.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "core/rng.h"

namespace hfta {
namespace {

constexpr uint64_t kShapesMix = 0x7368617065730001ull;
constexpr float kPi = 3.14159265358979f;

struct Vec3 {
  float x = 0, y = 0, z = 0;
};
Vec3 operator+(Vec3 a, Vec3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
Vec3 operator*(float s, Vec3 a) { return {s * a.x, s * a.y, s * a.z}; }
float norm(Vec3 a) { return std::sqrt(a.x * a.x + a.y * a.y + a.z * a.z); }

// An orthonormal frame: round primitives have their axis along `y`.
struct Frame {
  Vec3 origin, x{1, 0, 0}, y{0, 1, 0}, z{0, 0, 1};
  Vec3 at(float a, float b, float c) const { return origin + a * x + b * y + c * z; }
};
Frame upright(Vec3 origin) { return {origin}; }
// Axis along world +x (an airplane's fuselage).
Frame along_x(Vec3 origin) { return {origin, {0, 1, 0}, {1, 0, 0}, {0, 0, 1}}; }

enum class Kind { kRect, kDisk, kFrustum, kHemisphere, kTorus };

// One surface piece of one part. Meaning of a..d per kind:
//   kRect        corner frame.origin, edges u (frame.x scaled by a) and v (frame.z scaled by b)
//   kDisk        annulus radii a (inner) to b (outer), in the frame's xz plane
//   kFrustum     open side: radius a at y = 0, b at y = c
//   kHemisphere  radius a, the half with sign(y) = b
//   kTorus       ring radius a, tube radius b, arc of angles [c, d] about the axis
struct Piece {
  Kind kind;
  Frame f;
  float a = 0, b = 0, c = 0, d = 0;
  int part = 0;
  float area() const {
    switch (kind) {
      case Kind::kRect:
        return a * b;
      case Kind::kDisk:
        return kPi * (b * b - a * a);
      case Kind::kFrustum:
        return kPi * (a + b) * std::sqrt(c * c + (a - b) * (a - b));
      case Kind::kHemisphere:
        return 2 * kPi * a * a;
      case Kind::kTorus:
        return (d - c) * a * 2 * kPi * b;
    }
    return 0;
  }
  Vec3 sample(RngStream& rng) const {
    switch (kind) {
      case Kind::kRect:
        return f.at(a * rng.uniform(), 0, b * rng.uniform());
      case Kind::kDisk: {
        const float r = std::sqrt(rng.uniform(a * a, b * b)), t = rng.uniform(0, 2 * kPi);
        return f.at(r * std::cos(t), 0, r * std::sin(t));
      }
      case Kind::kFrustum: {
        // Height with density proportional to the radius there (rejection).
        const float top = std::max(a, b);
        float h, r;
        do {
          h = rng.uniform();
          r = a + (b - a) * h;
        } while (rng.uniform() * top > r);
        const float t = rng.uniform(0, 2 * kPi);
        return f.at(r * std::cos(t), c * h, r * std::sin(t));
      }
      case Kind::kHemisphere: {
        Vec3 n;
        do n = {rng.normal(), rng.normal(), rng.normal()};
        while (norm(n) < 1e-6f);
        n = (a / norm(n)) * n;
        return f.at(n.x, b * std::fabs(n.y), n.z);
      }
      case Kind::kTorus: {
        // Tube angle with density proportional to the distance from the axis (rejection).
        float v, w;
        do {
          v = rng.uniform(0, 2 * kPi);
          w = a + b * std::cos(v);
        } while (rng.uniform() * (a + b) > w);
        const float u = rng.uniform(c, d);
        return f.at(w * std::cos(u), b * std::sin(v), w * std::sin(u));
      }
    }
    return {};
  }
};

using Pieces = std::vector<Piece>;

void rect(Pieces& out, Frame f, float u, float v, int part) {
  out.push_back({Kind::kRect, f, u, v, 0, 0, part});
}
// The six faces of the box [lo, hi]; faces normal to y get part `lid` (default: part).
void box(Pieces& out, Vec3 lo, Vec3 hi, int part, int lid = -1) {
  const float dx = hi.x - lo.x, dy = hi.y - lo.y, dz = hi.z - lo.z;
  const int caps = lid < 0 ? part : lid;
  for (float y : {lo.y, hi.y}) rect(out, upright({lo.x, y, lo.z}), dx, dz, caps);
  for (float z : {lo.z, hi.z})  // the xy faces: frame x = world x, frame z = world y
    rect(out, {{lo.x, lo.y, z}, {1, 0, 0}, {0, 0, 1}, {0, 1, 0}}, dx, dy, part);
  for (float x : {lo.x, hi.x})  // the zy faces
    rect(out, {{x, lo.y, lo.z}, {0, 0, 1}, {1, 0, 0}, {0, 1, 0}}, dz, dy, part);
}
void disk(Pieces& out, Frame f, float r_in, float r_out, int part) {
  out.push_back({Kind::kDisk, f, r_in, r_out, 0, 0, part});
}
void frustum(Pieces& out, Frame f, float r0, float r1, float h, int part) {
  out.push_back({Kind::kFrustum, f, r0, r1, h, 0, part});
}

// Part ids: the first global id of each class, in class order.
constexpr int kFirstPart[kShapesClasses + 1] = {0, 2, 5, 8, 10, 12, 14, 16, 18, 19, 22};

// The canonical object of class c, with proportions varied a little by rng (the anisotropic
// scale varies them more).
Pieces build(int c, RngStream& rng) {
  Pieces p;
  const int first = kFirstPart[c];
  auto vary = [&](float x) { return x * rng.uniform(0.85f, 1.15f); };
  switch (c) {
    case 0: {  // table: top, legs
      const float w = vary(0.8f), d = vary(0.5f), h = vary(0.7f), r = vary(0.04f);
      box(p, {-w, h, -d}, {w, h + 0.06f, d}, first);
      for (float sx : {-1.f, 1.f})
        for (float sz : {-1.f, 1.f})
          frustum(p, upright({sx * (w - 0.1f), 0, sz * (d - 0.1f)}), r, r, h, first + 1);
      break;
    }
    case 1: {  // chair: seat, back, legs
      const float w = vary(0.4f), h = vary(0.45f), back = vary(0.8f), r = vary(0.03f);
      box(p, {-w, h, -w}, {w, h + 0.06f, w}, first);
      box(p, {-w, h + 0.06f, -w}, {w, h + 0.06f + back, -w + 0.06f}, first + 1);
      for (float sx : {-1.f, 1.f})
        for (float sz : {-1.f, 1.f})
          frustum(p, upright({sx * (w - 0.05f), 0, sz * (w - 0.05f)}), r, r, h, first + 2);
      break;
    }
    case 2: {  // lamp: base, pole, shade
      const float rb = vary(0.3f), hb = 0.05f, hp = vary(1.0f), rs = vary(0.35f);
      frustum(p, upright({}), rb, rb, hb, first);
      disk(p, upright({0, hb, 0}), 0, rb, first);
      disk(p, upright({}), 0, rb, first);
      frustum(p, upright({0, hb, 0}), 0.025f, 0.025f, hp - 0.1f, first + 1);
      frustum(p, upright({0, hp - 0.15f, 0}), rs, 0.4f * rs, vary(0.35f), first + 2);
      break;
    }
    case 3: {  // mug: body (side and bottom), handle
      const float r = vary(0.4f), h = vary(0.9f), R = vary(0.22f);
      frustum(p, upright({}), r, r, h, first);
      disk(p, upright({}), 0, r, first);
      // A half ring in the xy plane, bulging out of the side at +x.
      const Frame f{{r, h / 2, 0}, {1, 0, 0}, {0, 0, 1}, {0, 1, 0}};
      p.push_back({Kind::kTorus, f, R, 0.05f, -kPi / 2, kPi / 2, first + 1});
      break;
    }
    case 4: {  // cone: side, base
      const float r = vary(0.5f), h = vary(1.0f);
      frustum(p, upright({}), r, 0, h, first);
      disk(p, upright({}), 0, r, first + 1);
      break;
    }
    case 5: {  // cylinder: side, caps
      const float r = vary(0.5f), h = vary(1.0f);
      frustum(p, upright({}), r, r, h, first);
      disk(p, upright({}), 0, r, first + 1);
      disk(p, upright({0, h, 0}), 0, r, first + 1);
      break;
    }
    case 6: {  // box: sides, lid (top and bottom)
      const float w = vary(0.5f), h = vary(0.5f), d = vary(0.5f);
      box(p, {-w, -h, -d}, {w, h, d}, first, first + 1);
      break;
    }
    case 7: {  // sphere: upper, lower
      const float r = vary(0.5f);
      p.push_back({Kind::kHemisphere, upright({}), r, 1, 0, 0, first});
      p.push_back({Kind::kHemisphere, upright({}), r, -1, 0, 0, first + 1});
      break;
    }
    case 8: {  // torus: ring
      p.push_back({Kind::kTorus, upright({}), vary(0.5f), vary(0.15f), 0, 2 * kPi, first});
      break;
    }
    case 9: {  // airplane: fuselage, wings, tail
      const float len = vary(0.8f), r = vary(0.1f), span = vary(0.8f), chord = vary(0.15f);
      frustum(p, along_x({-len, 0, 0}), r, r, 2 * len, first);
      frustum(p, along_x({len, 0, 0}), r, 0, vary(0.25f), first);
      frustum(p, along_x({-len - 0.2f, 0, 0}), 0.3f * r, r, 0.2f, first);
      box(p, {-chord, -0.015f, -span}, {chord, 0.015f, span}, first + 1);
      box(p, {-len - 0.1f, r * 0.5f, -0.012f}, {-len + 0.1f, r + 0.3f, 0.012f}, first + 2);
      box(p, {-len - 0.1f, -0.01f, -0.3f}, {-len + 0.05f, 0.01f, 0.3f}, first + 2);
      break;
    }
  }
  return p;
}

const char* const kPartNames[kShapesParts] = {
    "top",   "leg",    "seat", "back",     "leg",  "base", "pole",  "shade",
    "body",  "handle", "side", "base",     "side", "caps", "sides", "lid",
    "upper", "lower",  "ring", "fuselage", "wing", "tail"};
const char* const kClassNames[kShapesClasses] = {
    "table", "chair", "lamp", "mug", "cone", "cylinder", "box", "sphere", "torus", "airplane"};

}  // namespace

std::vector<std::string> shapes_part_names(int c) {
  HFTA_CHECK(c >= 0 && c < kShapesClasses, "shapes class {} outside [0, {})", c, kShapesClasses);
  return {kPartNames + kFirstPart[c], kPartNames + kFirstPart[c + 1]};
}

PointCloudSet make_shapes(Split split, int64_t size, int64_t npoints, uint64_t seed,
                          const ShapesOptions& options) {
  HFTA_CHECK(size >= 1, "shapes dataset needs at least 1 sample, got {}", size);
  HFTA_CHECK(npoints >= 1, "shapes dataset needs at least 1 point per cloud, got {}", npoints);
  HFTA_CHECK(options.jitter_std >= 0 && std::isfinite(options.jitter_std),
             "shapes jitter_std must be finite and >= 0, got {}", options.jitter_std);
  HFTA_CHECK(options.min_scale > 0 && options.min_scale <= options.max_scale &&
                 std::isfinite(options.max_scale),
             "shapes scale range [{}, {}] must satisfy 0 < min_scale <= max_scale",
             options.min_scale, options.max_scale);
  const int64_t L = npoints;
  PointCloudSet out;
  out.name = fmt::format("shapes-{}-seed{}", split == Split::kTrain ? "train" : "test", seed);
  out.sample_shape = Shape{L, 3};
  out.size = size;
  out.num_classes = kShapesClasses;
  out.num_parts = kShapesParts;
  for (int c = 0; c < kShapesClasses; ++c) {
    out.class_names.push_back(kClassNames[c]);
    std::vector<int32_t> parts;
    for (int p = kFirstPart[c]; p < kFirstPart[c + 1]; ++p) parts.push_back(p);
    out.parts_of_class.push_back(std::move(parts));
  }
  out.images.resize(static_cast<size_t>(size * L * 3));
  out.labels.resize(static_cast<size_t>(size));
  out.part_labels.resize(static_cast<size_t>(size * L));
  const uint64_t stream_seed = seed ^ (kShapesMix * (split == Split::kTrain ? 1 : 2));
  parallel_for(size, [&](int64_t i) {
    RngStream rng(stream_seed, static_cast<uint64_t>(i));
    const int c = static_cast<int>(rng.below(kShapesClasses));
    out.labels[i] = c;
    const Pieces pieces = build(c, rng);
    std::vector<float> cumulative;
    float total = 0;
    for (const auto& piece : pieces) cumulative.push_back(total += piece.area());
    float scale[3];
    for (float& s : scale) s = rng.uniform(options.min_scale, options.max_scale);
    const float angle = rng.uniform(0, 2 * kPi), cs = std::cos(angle), sn = std::sin(angle);
    float* xyz = out.images.data() + i * L * 3;
    int32_t* parts = out.part_labels.data() + i * L;
    for (int64_t j = 0; j < L; ++j) {
      const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), rng.uniform() * total);
      const Piece& piece = pieces[std::min<size_t>(it - cumulative.begin(), pieces.size() - 1)];
      const Vec3 v = piece.sample(rng);
      const float x = v.x * scale[0], y = v.y * scale[1], z = v.z * scale[2];
      xyz[3 * j + 0] = cs * x + sn * z + options.jitter_std * rng.normal();
      xyz[3 * j + 1] = y + options.jitter_std * rng.normal();
      xyz[3 * j + 2] = -sn * x + cs * z + options.jitter_std * rng.normal();
      parts[j] = piece.part;
    }
    normalize_to_unit_sphere(std::span<float>(xyz, static_cast<size_t>(L * 3)));
  });
  return out;
}

}  // namespace hfta
