#pragma once
// Multi-scale attention backward, dK and dV: one CTA owns Bc keys of one key/value head, holds Kⱼ
// and Vⱼ in shared memory and streams past them every query block whose mask reaches them, of every
// query head that shares them (attention/fa2/backward_dkdv_kernel.cuh's pipeline and warp grids):
//   Aᵀ = scale · (K Qᵢᵀ) ∘ Mᵀ,   dV += (Aᵀ / d) dOᵢ,   dK += (scale · dAᵀ ∘ Mᵀ) Qᵢ,
// with dA as multiscale_gradients.cuh derives it. dK and dV are written once, without atomics.
#include "attention/fa2/backward_traits.cuh"
#include "attention/fa2/query_block_pipeline.cuh"
#include "multiscale/multiscale_gradients.cuh"
#include "tile/fragment_store.cuh"
#include "tile/gemm.cuh"
#include "tile/warp_grid.cuh"

namespace flashjit {

/// The query blocks of height `block_m` whose mask reaches keys [first_key, last_key] for some
/// head sharing `kv_head`: below the diagonal and, for the decay mask, within the farthest
/// reach of the group's rates; every block for a mask tensor.
template <MultiScaleMaskKind Kind>
FJ_DEVICE BlockRange multiscale_query_blocks(const MultiScaleParams& params, int kv_head,
                                             int first_key, int last_key, int block_m) {
  const AttentionBackwardParams& p = params.attention;
  const int diagonal = p.seqlen_k - p.seqlen_q;
  if constexpr (Kind == MultiScaleMaskKind::decay) {
    int reach = 0;
    for (int h = kv_head * p.heads_per_kv; h < (kv_head + 1) * p.heads_per_kv; ++h) {
      const int head_reach = decay_reach(log2_approx(load_global(params.mask, h)));
      reach = head_reach > reach ? head_reach : reach;
    }
    return KeyWindow<MaskKind::window>(p.seqlen_k, diagonal, reach, 0)
        .query_blocks(first_key, last_key, block_m, p.seqlen_q);
  } else {
    return KeyWindow<MaskKind::none>(p.seqlen_k, diagonal, AttentionForwardParams::kNoWindow,
                                     AttentionForwardParams::kNoWindow)
        .query_blocks(first_key, last_key, block_m, p.seqlen_q);
  }
}

/// This warp's block of Aᵀ / d and of the scores' gradient for one query block, written to the
/// pipeline's shared tiles p_t and ds_t.
template <class Traits, MultiScaleMaskKind Kind, class Grid>
FJ_DEVICE void multiscale_score_gradients(const MultiScaleParams& params,
                                          QueryBlockPipeline<Traits>& tiles,
                                          const QueryBlock<Traits>& block, int batch, int key0,
                                          const Grid& grid, int lane) {
  const AttentionBackwardParams& p = params.attention;
  const MultiScaleMask<Kind> mask(params, block.head);
  acc_tile<Grid::kRows, Grid::kCols> a_t, ds_t;  // (keys, queries): scale·K Qᵀ, then Aᵀ / d;
  fill(a_t, 0.0f);                               // dPᵀ, then the scores' gradient
  fill(ds_t, 0.0f);
  mma_abt(a_t, tiles.k, grid.row0, block.q, grid.col0, lane);      // K Qᵀ
  mma_abt(ds_t, tiles.v, grid.row0, block.dout, grid.col0, lane);  // dPᵀ = V dOᵀ
  MultiScaleRowStats stats[Grid::kCols / 8][2];                    // per query column of this lane
#pragma unroll
  for (int g = 0; g < Grid::kCols / 8; ++g)
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
      const int row = grid.col0 + fragment_col(g, pair, lane);
      stats[g][pair] = row < block.rows
                           ? MultiScaleRowStats::load(p, batch, block.head, block.row0 + row)
                           : MultiScaleRowStats{0.0f, 0.0f};
    }
#pragma unroll
  for (int i = 0; i < a_t.kSlabs; ++i)
#pragma unroll
    for (int g = 0; g < a_t.kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + grid.row0 + fragment_row(i, e / 2, lane);
        const int row = grid.col0 + fragment_col(g, e % 2, lane);  // in the query block
        const MultiScaleRowStats& stat = stats[g][e % 2];
        const float score = a_t.frag[i][g][e] * p.scale;
        const float m = row < block.rows ? mask.at(block.row0 + row, key) : 0.0f;
        multiscale_score_gradient(score, m, ds_t.frag[i][g][e], stat, p.scale);
        a_t.frag[i][g][e] = score * m * stat.inverse;  // A / d
      }
  store_fragments(a_t, tiles.p_t, grid.row0, grid.col0, lane);
  store_fragments(ds_t, tiles.ds_t, grid.row0, grid.col0, lane);
}

/// Grid (ceil(seqlen_k / kBlockN), heads_kv, batch), block kThreads, dynamic shared memory
/// Traits::kSharedBytes.
template <class Traits, MultiScaleMaskKind Kind>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    multiscale_backward_dkdv_kernel(MultiScaleParams params) {
  using ScoreGrid = WarpGrid<Traits::kBlockN, Traits::kBlockM, Traits::kWarps>;  // (keys, queries)
  using KeyGrid = WarpGrid<Traits::kBlockN, Traits::kHeadDimPadded, Traits::kWarps>;  // (keys, d)
  const AttentionBackwardParams& p = params.attention;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const ScoreGrid scores(warp);
  const KeyGrid gradients(warp);
  const int batch = blockIdx.z;
  const int key0 = int(blockIdx.x) * Traits::kBlockN;  // the block's first key
  const int keys = min_int(Traits::kBlockN, p.seqlen_k - key0);
  if (keys <= 0) return;
  const int kv_head = blockIdx.y;
  // Keys no query's mask reaches are not loaded: their dK and dV are exactly zero.
  const BlockRange blocks =
      multiscale_query_blocks<Kind>(params, kv_head, key0, key0 + keys - 1, Traits::kBlockM);

  QueryBlockPipeline<Traits> pipeline(p, batch, kv_head, blocks);
  acc_tile<KeyGrid::kRows, KeyGrid::kCols> dk, dv;  // (keys, d) blocks of this warp
  fill(dk, 0.0f);
  fill(dv, 0.0f);
  if (pipeline.steps() > 0) pipeline.start(p, key0, keys);
  for (int step = 0; step < pipeline.steps(); ++step) {
    const QueryBlock<Traits> block = pipeline.await(step);  // Qᵢ, dOᵢ of one head
    multiscale_score_gradients<Traits, Kind>(params, pipeline, block, batch, key0, scores, lane);
    __syncthreads();  // every warp's blocks of Aᵀ / d and dSᵀ are in shared memory
    mma_ab(dv, pipeline.p_t, gradients.row0, block.dout, gradients.col0, lane);  // dV += Aᵀ/d dO
    mma_ab(dk, pipeline.ds_t, gradients.row0, block.q, gradients.col0, lane);    // dK += dSᵀ Q
    pipeline.release(step);
  }
  pipeline.store_key_gradients(dk, dv, p.dk, p.dv, key0, keys, gradients, lane);
}

}  // namespace flashjit
