// Edges between callers' plain buffers and oneDNN primitives (dnnl_edges.h): reorders, and the
// channel-blocking transposes (16 x 16 with AVX-512, 8 x 8 with AVX2, plain loops for the rest).
#include "fused_ops/cpu/dnnl_edges.h"

#include "core/parallel.h"
#include "fused_ops/cpu/simd.h"

namespace hfta::cpu {

namespace {

using dnnl::memory;
using Dims = memory::dims;

#if defined(__AVX512F__)
// Row r of the 16 x 16 tile at src (rows src_ld floats apart) becomes column r of the tile at
// dst (rows dst_ld floats apart); with Add, is added to it.
template <bool Add>
inline void transpose16x16(const float* src, int64_t src_ld, float* dst, int64_t dst_ld) {
  __m512 r[16], t[16], u[16];
  for (int64_t i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_ld);
  // Within each 128-bit lane: 4 x 4 transposes of rows 4g..4g+3; u[4g+j] holds column j (+4k in
  // lane k) of those rows.
  for (int64_t g = 0; g < 4; ++g) {
    t[4 * g + 0] = _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]);
    t[4 * g + 1] = _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]);
    t[4 * g + 2] = _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
    t[4 * g + 3] = _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
    auto pd = [](__m512 x) { return _mm512_castps_pd(x); };
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * g]), pd(t[4 * g + 2])));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * g]), pd(t[4 * g + 2])));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * g + 1]), pd(t[4 * g + 3])));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * g + 1]), pd(t[4 * g + 3])));
  }
  auto store = [](float* at, __m512 v) {
    if constexpr (Add) v = _mm512_add_ps(_mm512_loadu_ps(at), v);
    _mm512_storeu_ps(at, v);
  };
  // Gather lane k of u[j] from the four row groups: output row 4k + j.
  for (int64_t j = 0; j < 4; ++j) {
    const __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);  // lanes 0, 2 of groups 0, 1
    const __m512 w = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);  // lanes 1, 3
    const __m512 x = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 y = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
    store(dst + (0 + j) * dst_ld, _mm512_shuffle_f32x4(v, x, 0x88));
    store(dst + (8 + j) * dst_ld, _mm512_shuffle_f32x4(v, x, 0xdd));
    store(dst + (4 + j) * dst_ld, _mm512_shuffle_f32x4(w, y, 0x88));
    store(dst + (12 + j) * dst_ld, _mm512_shuffle_f32x4(w, y, 0xdd));
  }
}
#endif

#if defined(__AVX2__)
// The 8 x 8 tile's version of transpose16x16, for the nChw8c layout of oneDNN's AVX2 kernels.
template <bool Add>
inline void transpose8x8(const float* src, int64_t src_ld, float* dst, int64_t dst_ld) {
  __m256 r[8], t[8], u[8];
  for (int64_t i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_ld);
  // Per 128-bit lane: pairs of rows interleaved, then 4-row columns: u[j] holds column j of rows
  // 0..3 in its low lane and column j + 4 in its high lane (u[4 + j]: rows 4..7).
  for (int64_t g = 0; g < 2; ++g) {
    const int64_t o = 4 * g;
    t[o + 0] = _mm256_unpacklo_ps(r[o], r[o + 1]);
    t[o + 1] = _mm256_unpackhi_ps(r[o], r[o + 1]);
    t[o + 2] = _mm256_unpacklo_ps(r[o + 2], r[o + 3]);
    t[o + 3] = _mm256_unpackhi_ps(r[o + 2], r[o + 3]);
    u[o + 0] = _mm256_shuffle_ps(t[o], t[o + 2], 0x44);
    u[o + 1] = _mm256_shuffle_ps(t[o], t[o + 2], 0xee);
    u[o + 2] = _mm256_shuffle_ps(t[o + 1], t[o + 3], 0x44);
    u[o + 3] = _mm256_shuffle_ps(t[o + 1], t[o + 3], 0xee);
  }
  auto store = [](float* at, __m256 v) {
    if constexpr (Add) v = _mm256_add_ps(_mm256_loadu_ps(at), v);
    _mm256_storeu_ps(at, v);
  };
  for (int64_t j = 0; j < 4; ++j) {
    store(dst + j * dst_ld, _mm256_permute2f128_ps(u[j], u[4 + j], 0x20));
    store(dst + (4 + j) * dst_ld, _mm256_permute2f128_ps(u[j], u[4 + j], 0x31));
  }
}
#endif

// One (image, channel block): the blk x HW matrix at `plain` (rows HW apart) and the HW x blk
// matrix at `blocked`; `how` picks the direction.
void transpose_channel_block(float* plain, float* blocked, int64_t HW, int64_t blk,
                             Conversion how) {
  int64_t hw = 0;
#if defined(__AVX512F__)
  if (blk == 16) {
    for (; hw + 16 <= HW; hw += 16) {
      if (how == Conversion::kToBlocked)
        transpose16x16<false>(plain + hw, HW, blocked + hw * 16, 16);
      else if (how == Conversion::kToPlain)
        transpose16x16<false>(blocked + hw * 16, 16, plain + hw, HW);
      else
        transpose16x16<true>(blocked + hw * 16, 16, plain + hw, HW);
    }
  }
#endif
#if defined(__AVX2__)
  if (blk == 8) {
    for (; hw + 8 <= HW; hw += 8) {
      if (how == Conversion::kToBlocked)
        transpose8x8<false>(plain + hw, HW, blocked + hw * 8, 8);
      else if (how == Conversion::kToPlain)
        transpose8x8<false>(blocked + hw * 8, 8, plain + hw, HW);
      else
        transpose8x8<true>(blocked + hw * 8, 8, plain + hw, HW);
    }
  }
#endif
  for (; hw < HW; ++hw)
    for (int64_t c = 0; c < blk; ++c) {
      if (how == Conversion::kToBlocked)
        blocked[hw * blk + c] = plain[c * HW + hw];
      else if (how == Conversion::kToPlain)
        plain[c * HW + hw] = blocked[hw * blk + c];
      else
        plain[c * HW + hw] += blocked[hw * blk + c];
    }
}

// The blocked copy for layout `want`: in `pool` when it holds that layout (or is still empty),
// else a buffer of its own.
memory pooled(memory* pool, const memory::desc& want) {
  if (pool == nullptr) return memory(want, dnnl_engine());
  if (!*pool) *pool = memory(want, dnnl_engine());
  return pool->get_desc() == want ? *pool : memory(want, dnnl_engine());
}

void reorder(dnnl::stream& stream, const dnnl::reorder& r, const memory& from, const memory& to) {
  r.execute(stream, const_cast<memory&>(from), const_cast<memory&>(to));
}

}  // namespace

void convert_channel_blocks(const ChannelBlocking& b, float* plain, float* blocked,
                            Conversion how) {
  const int64_t blocks = b.C / b.blk;
  parallel_for(b.N * blocks, [&](int64_t i) {
    const int64_t n = i / blocks, cb = i % blocks;
    transpose_channel_block(plain + n * b.ld + cb * b.blk * b.HW,
                            blocked + (n * blocks + cb) * b.blk * b.HW, b.HW, b.blk, how);
  });
}

// NOLINTBEGIN(bugprone-easily-swappable-parameters): the caller's and the primitive's views of one
// tensor; conv2d_onednn.cpp's call sites pass locals named like them.
ChannelBlocking channel_blocking(const memory::desc& user, const memory::desc& inner) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  ChannelBlocking b;
  const Dims dims = user.dims();
  if (dims.size() != 4 || user.data.format_kind != dnnl_blocked) return b;
  const Dims strides(user.data.format_desc.blocking.strides,
                     user.data.format_desc.blocking.strides + 4);
  if (user.data.format_desc.blocking.inner_nblks != 0 || strides[3] != 1 || strides[2] != dims[3] ||
      strides[1] != dims[2] * dims[3] || strides[0] < dims[1] * dims[2] * dims[3])
    return b;
  for (int64_t blk : {16, 8}) {
    const auto tag = blk == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
    if (dims[1] % blk == 0 && inner == memory::desc(dims, memory::data_type::f32, tag)) {
      b = {dims[0], dims[1], dims[2] * dims[3], strides[0], blk};
      break;
    }
  }
  return b;
}

Edge input_edge(const memory::desc& user_md, const memory::desc& want, memory* pool) {
  Edge e;
  e.user = memory(user_md, dnnl_engine(), DNNL_MEMORY_NONE);
  e.separate = !(user_md == want);
  if (!e.separate) {
    e.inner = e.user;
    return e;
  }
  e.inner = pooled(pool, want);
  e.blocking = channel_blocking(user_md, want);
  if (!e.blocking.blk) e.to_inner = dnnl::reorder(e.user, e.inner);
  return e;
}

Edge output_edge(const memory::desc& user_md, const memory::desc& got, bool can_write, bool can_add,
                 memory* pool) {
  Edge e;
  e.user = memory(user_md, dnnl_engine(), DNNL_MEMORY_NONE);
  e.separate = can_add || !(user_md == got);
  e.inner = e.separate ? pooled(pool, got) : e.user;
  if (e.separate && can_write) {
    e.blocking = channel_blocking(user_md, got);
    if (!e.blocking.blk) e.write = dnnl::reorder(e.inner, e.user);
  }
  if (can_add) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(sum);
    e.add = dnnl::reorder(
        dnnl::reorder::primitive_desc(dnnl_engine(), got, dnnl_engine(), user_md, attr));
  }
  return e;
}

void bring_in(dnnl::stream& stream, const Edge& e, bool first, int64_t step, bool stale) {
  if (!e.separate || (!first && step == 0 && !stale)) return;
  if (e.blocking.blk)
    convert_channel_blocks(e.blocking, e.user_data(), e.inner_data(), Conversion::kToBlocked);
  else
    reorder(stream, e.to_inner, e.user, e.inner);
}

void write_out(dnnl::stream& stream, const Edge& e) {
  if (!e.separate) return;
  if (e.blocking.blk)
    convert_channel_blocks(e.blocking, e.user_data(), e.inner_data(), Conversion::kToPlain);
  else
    reorder(stream, e.write, e.inner, e.user);
}

void add_out(dnnl::stream& stream, const Edge& e) {
  if (e.blocking.blk)
    convert_channel_blocks(e.blocking, e.user_data(), e.inner_data(), Conversion::kAddToPlain);
  else
    reorder(stream, e.add, e.inner, e.user);
}

void store_out(dnnl::stream& stream, const Edge& e, bool add) {
  if (add)
    add_out(stream, e);
  else
    write_out(stream, e);
}

}  // namespace hfta::cpu
