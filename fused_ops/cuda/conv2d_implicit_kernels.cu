// The implicit-GEMM conv2d's kernels (fused_ops/cuda/conv2d_implicit.cpp launches them): each is
// one GEMM-shaped loop per (image, model, group) whose operands are gathered on the fly, never
// materialised. A block computes a BM x BN tile of outputs, each of its 256 threads TM x TN of
// them in registers; per step of kTileK reduction indices the block stages the two operands'
// slices in shared memory (loaded by conv2d_implicit_math.h's *_operand functions, 0 outside the
// problem) and every thread runs its chains one fmaf further. Each output's chain is therefore the
// math header's *_value function, in the same order on any tile size, so the host mirror gives
// the device's bits; tiles change only how data is loaded.
#include "fused_ops/cuda/conv2d_implicit_math.h"
#include "fused_ops/cuda/kernels.h"
#include "fused_ops/cuda/launch.cuh"

namespace hfta::cuda::kernels {

namespace {

using implicit_math::ImplicitGeometry;

inline constexpr int kTileK = 16;

// Rows of BM outputs, columns of BN, TM x TN per thread: its rows are ty + i*(BM/TM) and its
// columns tx + j*(BN/TN), so a warp's shared-memory reads and global stores are consecutive.
template <int BM_, int BN_, int TM_, int TN_>
struct Tile {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_;
  static constexpr int kRowThreads = BM / TM, kColThreads = BN / TN;
  static_assert(kRowThreads * kColThreads == kThreads, "a tile takes one block of kThreads");
};
using WideTile = Tile<64, 64, 4, 4>;     // 16 x 16 threads
using NarrowTile = Tile<16, 128, 2, 4>;  // 8 x 32
using ThinTile = Tile<4, 256, 1, 4>;     // 4 x 64: depthwise and other groups of few channels

// The operands' staging: a [kTileK][BM] slice of A (rows x reduction) and a [kTileK][BN] slice of
// B (reduction x columns), padded by one float so that loads along the reduction hit distinct
// banks.
template <class T>
struct Staging {
  float a[kTileK][T::BM + 1];
  float b[kTileK][T::BN + 1];
};

// acc[i][j] = fmaf(A[m_i, k], B[k, col_j], acc[i][j]) for k = 0, 1, ..., K-1 in order, for the
// thread's outputs (m_i, col_j) of the tile at (m0, col0). load_a(m, k) and load_b(k, col) give the
// operands inside [0, M) x [0, K) and [0, K) x [0, cols); b_reduction_fast says which of B's
// indices is contiguous in memory, to coalesce the loads (A's is always the reduction).
template <class T, bool b_reduction_fast, class LoadA, class LoadB>
__device__ void accumulate(Staging<T>& s, int M, int cols, int K, int m0, int col0,
                           const LoadA& load_a, const LoadB& load_b, float (&acc)[T::TM][T::TN]) {
  const int tid = threadIdx.x, tx = tid % T::kColThreads, ty = tid / T::kColThreads;
  for (int k0 = 0; k0 < K; k0 += kTileK) {
    for (int e = tid; e < kTileK * T::BM; e += kThreads) {
      const int kk = e % kTileK, mm = e / kTileK, m = m0 + mm, k = k0 + kk;
      s.a[kk][mm] = m < M && k < K ? load_a(m, k) : 0.0f;
    }
    for (int e = tid; e < kTileK * T::BN; e += kThreads) {
      const int kk = b_reduction_fast ? e % kTileK : e / T::BN;
      const int cc = b_reduction_fast ? e / kTileK : e % T::BN;
      const int k = k0 + kk, col = col0 + cc;
      s.b[kk][cc] = col < cols && k < K ? load_b(k, col) : 0.0f;
    }
    __syncthreads();
    // Only indices inside the reduction: a padded step would add a zero product (+0 turns an
    // accumulated -0 into +0, which the mirror's chain never does).
    const int steps = K - k0 < kTileK ? K - k0 : kTileK;
    for (int kk = 0; kk < steps; ++kk) {
      float a[T::TM], b[T::TN];
#pragma unroll
      for (int i = 0; i < T::TM; ++i) a[i] = s.a[kk][ty + i * T::kRowThreads];
#pragma unroll
      for (int j = 0; j < T::TN; ++j) b[j] = s.b[kk][tx + j * T::kColThreads];
#pragma unroll
      for (int i = 0; i < T::TM; ++i)
#pragma unroll
        for (int j = 0; j < T::TN; ++j) acc[i][j] = fma_rn(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
}

// The thread's output (i, j) of the tile at (m0, col0): its row and column.
template <class T>
__device__ int tile_row(int m0, int i) {
  return m0 + static_cast<int>(threadIdx.x) / T::kColThreads + i * T::kRowThreads;
}
template <class T>
__device__ int tile_col(int col0, int j) {
  return col0 + static_cast<int>(threadIdx.x) % T::kColThreads + j * T::kColThreads;
}

// Splits the flat block index into (outer, row tile, column tile), column tiles fastest.
struct BlockTile {
  int64_t outer;
  int m0, col0;
};
template <class T>
__device__ BlockTile block_tile(int M, int cols) {
  const int64_t m_tiles = (M + T::BM - 1) / T::BM, col_tiles = (cols + T::BN - 1) / T::BN;
  const int64_t block = blockIdx.x;
  return {block / (m_tiles * col_tiles), static_cast<int>(block / col_tiles % m_tiles) * T::BM,
          static_cast<int>(block % col_tiles) * T::BN};
}

// y: one (image n, model b, group grp) per outer index n*B*G + b*G + grp; tiles of [cog, P].
template <class T>
__global__ void __launch_bounds__(kThreads)
    implicit_forward_kernel(ImplicitGeometry g, const float* __restrict__ x,
                            const float* __restrict__ weight, const float* __restrict__ bias,
                            float* __restrict__ y) {
  __shared__ Staging<T> s;
  const int M = g.cog(), P = g.positions();
  const BlockTile bt = block_tile<T>(M, P);
  const int64_t n = bt.outer / (g.B * g.groups);
  const int pair = static_cast<int>(bt.outer % (g.B * g.groups));
  const int b = pair / g.groups, grp = pair % g.groups;
  const float* x_group = x + implicit_math::x_group_offset(g, n, b, grp);
  const float* w_group = weight + implicit_math::weight_group_offset(g, b, grp);
  float acc[T::TM][T::TN];
#pragma unroll
  for (int i = 0; i < T::TM; ++i) {
    const int m = tile_row<T>(bt.m0, i);
    const float start = g.bias && m < M ? bias[b * g.out_channels + grp * M + m] : 0.0f;
#pragma unroll
    for (int j = 0; j < T::TN; ++j) acc[i][j] = start;
  }
  accumulate<T, false>(
      s, M, P, g.k_forward(), bt.m0, bt.col0,
      [&](int m, int k) { return implicit_math::forward_weight(g, w_group, m, k); },
      [&](int k, int q) { return implicit_math::forward_input(g, x_group, k, q); }, acc);
  float* y_group = y + implicit_math::y_group_offset(g, n, b, grp);
#pragma unroll
  for (int i = 0; i < T::TM; ++i)
#pragma unroll
    for (int j = 0; j < T::TN; ++j) {
      const int m = tile_row<T>(bt.m0, i), q = tile_col<T>(bt.col0, j);
      if (m < M && q < P) y_group[int64_t{m} * P + q] = acc[i][j];
    }
}

// dx: one (image n, model b, group grp) per outer index n*B*G + b*G + grp (a shared input:
// n*G + grp, the models summed in order inside); tiles of [cig, H*W].
template <class T>
__global__ void __launch_bounds__(kThreads)
    implicit_data_kernel(ImplicitGeometry g, const float* __restrict__ weight,
                         const float* __restrict__ dy, float* __restrict__ dx, bool accumulate_dx) {
  __shared__ Staging<T> s;
  const int M = g.cig(), HW = g.plane();
  const BlockTile bt = block_tile<T>(M, HW);
  const int per_image = g.shared_input ? g.groups : g.B * g.groups;
  const int64_t n = bt.outer / per_image;
  const int pair = static_cast<int>(bt.outer % per_image);
  const int b_first = g.shared_input ? 0 : pair / g.groups, grp = pair % g.groups;
  const int b_end = g.shared_input ? g.B : b_first + 1;
  float* dx_group = dx + implicit_math::x_group_offset(g, n, b_first, grp);
  float value[T::TM][T::TN];
#pragma unroll
  for (int i = 0; i < T::TM; ++i)
#pragma unroll
    for (int j = 0; j < T::TN; ++j) {
      const int m = tile_row<T>(bt.m0, i), p = tile_col<T>(bt.col0, j);
      value[i][j] = accumulate_dx && m < M && p < HW ? dx_group[int64_t{m} * HW + p] : 0.0f;
    }
  for (int b = b_first; b < b_end; ++b) {
    const float* w_group = weight + implicit_math::weight_group_offset(g, b, grp);
    const float* dy_group = dy + implicit_math::y_group_offset(g, n, b, grp);
    float acc[T::TM][T::TN];
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
      for (int j = 0; j < T::TN; ++j) acc[i][j] = 0.0f;
    accumulate<T, false>(
        s, M, HW, g.k_data(), bt.m0, bt.col0,
        [&](int m, int k) { return implicit_math::data_weight(g, w_group, m, k); },
        [&](int k, int p) { return implicit_math::data_grad(g, dy_group, k, p); }, acc);
#pragma unroll
    for (int i = 0; i < T::TM; ++i)
#pragma unroll
      for (int j = 0; j < T::TN; ++j) value[i][j] += acc[i][j];
  }
#pragma unroll
  for (int i = 0; i < T::TM; ++i)
#pragma unroll
    for (int j = 0; j < T::TN; ++j) {
      const int m = tile_row<T>(bt.m0, i), p = tile_col<T>(bt.col0, j);
      if (m < M && p < HW) dx_group[int64_t{m} * HW + p] = value[i][j];
    }
}

// dweight of models [b0, b0 + models): one (model, group, chunk) per outer index
// ((b - b0)*G + grp)*chunks + chunk; tiles of [cog, cig*T]. With one chunk the sum goes straight
// into dweight (old + sum); otherwise into partials [chunks, models*C_out, cig*T].
template <class T>
__global__ void __launch_bounds__(kThreads)
    implicit_weight_kernel(ImplicitGeometry g, const float* __restrict__ x,
                           const float* __restrict__ dy, float* __restrict__ dweight,
                           float* __restrict__ partials, int b0, int models) {
  __shared__ Staging<T> s;
  const int M = g.cog(), K = g.k_forward(), chunks = g.dweight_chunks();
  const BlockTile bt = block_tile<T>(M, K);
  const int chunk = static_cast<int>(bt.outer % chunks);
  const int pair = static_cast<int>(bt.outer / chunks);
  const int b = b0 + pair / g.groups, grp = pair % g.groups;
  const int r0 = chunk * implicit_math::kDweightChunk;
  const int rest = g.reduction_dweight() - r0;
  const int length = rest < implicit_math::kDweightChunk ? rest : implicit_math::kDweightChunk;
  float acc[T::TM][T::TN];
#pragma unroll
  for (int i = 0; i < T::TM; ++i)
#pragma unroll
    for (int j = 0; j < T::TN; ++j) acc[i][j] = 0.0f;
  accumulate<T, true>(
      s, M, K, length, bt.m0, bt.col0,
      [&](int m, int r) { return implicit_math::dweight_grad(g, dy, b, grp, m, r0 + r); },
      [&](int r, int k) { return implicit_math::dweight_input(g, x, b, grp, r0 + r, k); }, acc);
  const int64_t row0 = int64_t{b * g.out_channels + grp * M};
  const int64_t slice = int64_t{models} * g.out_channels * K;  // one chunk's partials
#pragma unroll
  for (int i = 0; i < T::TM; ++i)
#pragma unroll
    for (int j = 0; j < T::TN; ++j) {
      const int m = tile_row<T>(bt.m0, i), k = tile_col<T>(bt.col0, j);
      if (m >= M || k >= K) continue;
      const int64_t index = (row0 + m) * K + k;
      if (chunks == 1)
        dweight[index] = implicit_math::dweight_value(dweight[index], &acc[i][j], 0, 1);
      else
        partials[chunk * slice + index - int64_t{b0} * g.out_channels * K] = acc[i][j];
    }
}

// dweight of models [b0, b0 + models) from the partials: one thread per element.
__global__ void implicit_weight_combine_kernel(ImplicitGeometry g,
                                               const float* __restrict__ partials,
                                               float* __restrict__ dweight, int64_t slice) {
  for_each_index(slice, [&](int64_t e) {
    dweight[e] = implicit_math::dweight_value(dweight[e], partials + e, slice, g.dweight_chunks());
  });
}

// Launches Launch<T>::run over `outer` x the tiles of [M, cols], the tile T chosen by M (its
// rows): the choice moves loads, never the arithmetic. A grid beyond gridDim.x's 2^31 - 1 blocks
// is refused (the host side checks a bound first, with a message).
template <class T>
int64_t blocks_for(int M, int cols, int64_t outer) {
  return outer * ((M + T::BM - 1) / T::BM) * ((cols + T::BN - 1) / T::BN);
}
template <template <class> class Launch, class... Args>
cudaError_t launch_for_rows(int M, int cols, int64_t outer, cudaStream_t stream, Args... args) {
  const int64_t blocks = M > 16  ? blocks_for<WideTile>(M, cols, outer)
                         : M > 4 ? blocks_for<NarrowTile>(M, cols, outer)
                                 : blocks_for<ThinTile>(M, cols, outer);
  if (blocks < 1 || blocks > int64_t{0x7fffffff}) return cudaErrorInvalidConfiguration;
  const auto grid = static_cast<unsigned>(blocks);
  if (M > 16)
    Launch<WideTile>::run(grid, stream, args...);
  else if (M > 4)
    Launch<NarrowTile>::run(grid, stream, args...);
  else
    Launch<ThinTile>::run(grid, stream, args...);
  return cudaGetLastError();
}

template <class T>
struct ForwardLaunch {
  static void run(unsigned blocks, cudaStream_t stream, const ImplicitGeometry& g, const float* x,
                  const float* weight, const float* bias, float* y) {
    implicit_forward_kernel<T><<<blocks, kThreads, 0, stream>>>(g, x, weight, bias, y);
  }
};
template <class T>
struct DataLaunch {
  static void run(unsigned blocks, cudaStream_t stream, const ImplicitGeometry& g,
                  const float* weight, const float* dy, float* dx, bool accumulate) {
    implicit_data_kernel<T><<<blocks, kThreads, 0, stream>>>(g, weight, dy, dx, accumulate);
  }
};
template <class T>
struct WeightLaunch {
  static void run(unsigned blocks, cudaStream_t stream, const ImplicitGeometry& g, const float* x,
                  const float* dy, float* dweight, float* partials, int b0, int models) {
    implicit_weight_kernel<T>
        <<<blocks, kThreads, 0, stream>>>(g, x, dy, dweight, partials, b0, models);
  }
};

}  // namespace

cudaError_t implicit_conv_forward(const ImplicitGeometry& g, const float* x, const float* weight,
                                  const float* bias, float* y, cudaStream_t stream) {
  return launch_for_rows<ForwardLaunch>(g.cog(), g.positions(), int64_t{g.N} * g.B * g.groups,
                                        stream, g, x, weight, bias, y);
}

cudaError_t implicit_conv_backward_data(const ImplicitGeometry& g, const float* weight,
                                        const float* dy, float* dx, bool accumulate,
                                        cudaStream_t stream) {
  const int64_t per_image = g.shared_input ? g.groups : int64_t{g.B} * g.groups;
  return launch_for_rows<DataLaunch>(g.cig(), g.plane(), g.N * per_image, stream, g, weight, dy, dx,
                                     accumulate);
}

cudaError_t implicit_conv_backward_weight(const ImplicitGeometry& g, const float* x,
                                          const float* dy, float* dweight, float* partials, int b0,
                                          int models, cudaStream_t stream) {
  const int64_t outer = int64_t{models} * g.groups * g.dweight_chunks();
  cudaError_t status = launch_for_rows<WeightLaunch>(g.cog(), g.k_forward(), outer, stream, g, x,
                                                     dy, dweight, partials, b0, models);
  if (status != cudaSuccess || g.dweight_chunks() == 1) return status;
  const int64_t slice = int64_t{models} * g.out_channels * g.k_forward();
  implicit_weight_combine_kernel<<<grid_for(slice), kThreads, 0, stream>>>(
      g, partials, dweight + int64_t{b0} * g.out_channels * g.k_forward(), slice);
  return cudaGetLastError();
}

}  // namespace hfta::cuda::kernels
