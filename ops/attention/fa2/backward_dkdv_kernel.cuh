#pragma once
// Backward, dK and dV (docs/design.md), and by default dQ too: one CTA owns Bc keys of one
// key/value head, holds Kⱼ and Vⱼ in shared memory and streams past them every query block that
// sees them, of every query head that shares them (GQA sums those heads' contributions):
//   Pᵀ = 2^(K Qᵢᵀ − LSE),  dSᵀ = Pᵀ ∘ (V dOᵢᵀ − D),  dV += Pᵀ dOᵢ,  dK += dSᵀ Qᵢ,
// and with Traits::kAtomicDq, dQᵢ += dS Kⱼ into an fp32 workspace: FlashAttention-2's five
// products per block pair. The warps split every product in two dimensions (tile/warp_grid.cuh);
// Pᵀ and dSᵀ pass through shared memory from the warps that compute them to the warps that
// multiply them. dK and dV are written once, without atomics.
#include "attention/fa2/backward_traits.cuh"
#include "attention/fa2/query_block_pipeline.cuh"
#include "attention/parts/backward_scores.cuh"
#include "attention/parts/backward_sequence.cuh"
#include "attention/parts/block_mask_ranges.cuh"
#include "attention/parts/dropout_tiles.cuh"
#include "attention/parts/mask.cuh"
#include "attention/parts/modifiers.cuh"
#include "tile/fragment_store.cuh"
#include "tile/gemm.cuh"
#include "tile/warp_grid.cuh"

namespace flashjit {

/// LSE (base 2) and D of the query columns of a warp's (keys, queries) block, in registers:
/// +inf and 0 past the block's valid rows, so their P and dS are 0.
template <int Cols>
struct QueryStats {
  col_vec<Cols> lse;
  col_vec<Cols> delta;

  template <class Traits>
  FJ_DEVICE QueryStats(const AttentionBackwardParams& p, int batch, const QueryBlock<Traits>& block,
                       int col0, int lane) {
    const float* lse_in = lse_rows(p, batch, block.head, block.row0);
    const float* delta_in =
        p.delta + (index_t(batch) * p.heads_q + block.head) * p.seqlen_q + block.row0;
#pragma unroll
    for (int g = 0; g < Cols / 8; ++g)
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        const int row = col0 + fragment_col(g, pair, lane);
        const bool valid = row < block.rows;
        lse.v[g][pair] = valid ? lse_base2(load_global(lse_in, row)) : -negative_infinity();
        delta.v[g][pair] = valid ? load_global(delta_in, row) : 0.0f;
      }
  }
};

/// This warp's block of Pᵀ and dSᵀ for one query block, written to the pipeline's shared tiles.
template <class Traits, class Window, class Grid>
FJ_DEVICE void score_gradients(const AttentionBackwardParams& params, const Window& window,
                               QueryBlockPipeline<Traits>& tiles, const QueryBlock<Traits>& block,
                               int batch, int sequence, int key0, const Grid& grid, int lane) {
  acc_tile<Grid::kRows, Grid::kCols> p_t;  // (keys, queries): Sᵀ, then Pᵀ
  fill(p_t, 0.0f);
  mma_abt(p_t, tiles.k, grid.row0, block.q, grid.col0, lane);  // Sᵀ = K Qᵀ
  ScoreScaling<Traits::kSoftcap, Grid::kRows, Grid::kCols> scaling;
  scaling.scale(p_t, params);                // Sᵀ·scale·log2 e
  const auto position = [&](int r, int c) {  // of element (r, c): key row r, query column c
    const int key = key0 + grid.row0 + r, row = grid.col0 + c;
    return ScorePosition{row < block.rows && key < params.seqlen_k, block.head, block.row0 + row,
                         key};
  };
  ModifiedScores<typename Traits::Modifiers, Grid::kRows, Grid::kCols> modified;
  modified.apply(p_t, sequence, position, params.captures, lane);  // score_mod, mask_mod
  if (!window.block_fully_visible(block.row0, block.row0 + block.rows - 1, key0, Traits::kBlockN)) {
    mask_scores_transposed(window, p_t, key0 + grid.row0, block.row0 + grid.col0, lane);
  }
  const QueryStats<Grid::kCols> stats(params, batch, block, grid.col0, lane);
  exp2_sub_col(p_t, stats.lse);             // Pᵀ = 2^(Sᵀ − LSE)
  acc_tile<Grid::kRows, Grid::kCols> ds_t;  // (keys, queries): dPᵀ, then dSᵀ
  fill(ds_t, 0.0f);
  mma_abt(ds_t, tiles.v, grid.row0, block.dout, grid.col0, lane);  // dPᵀ = V dOᵀ
  if constexpr (Traits::Modifiers::kDropout) {  // dSᵀ = Pᵀ ∘ (dPᵀ ∘ Zᵀ − D), Pᵀ ∘ Zᵀ for dV
    dropout_gradients_transposed(p_t, ds_t, stats.delta, params.dropout,
                                 sequence * params.heads_q + block.head, key0 + grid.row0,
                                 block.row0 + grid.col0, lane);
  } else {
    sub_col(ds_t, stats.delta);
    mul_elements(ds_t, p_t);  // dSᵀ = Pᵀ ∘ (dPᵀ − D)
  }
  // Each (key, query) pair's dS is made once, here: the captures' gradients are added here only.
  modified.add_capture_gradients(ds_t, sequence, position, params.captures, lane);
  modified.chain(ds_t, lane);  // through score_mod
  scaling.chain(ds_t);         // through softcap
  store_fragments(p_t, tiles.p_t, grid.row0, grid.col0, lane);
  store_fragments(ds_t, tiles.ds_t, grid.row0, grid.col0, lane);
}

/// This warp's block of dQᵢ += dS Kⱼ, added to the fp32 workspace (scaled at the end, by the
/// kernel that rounds it into dQ), in passes of at most 64 columns.
template <class Traits>
FJ_DEVICE void add_query_gradients(const AttentionBackwardParams& params,
                                   const QueryBlockPipeline<Traits>& tiles,
                                   const QueryBlock<Traits>& block, int batch, int warp, int lane) {
  using Grid = WarpGrid<Traits::kBlockM, Traits::kHeadDimPadded, Traits::kWarps>;  // (queries, d)
  constexpr int kPassCols = attention_backward_space::dq_pass_cols(Grid::kCols);
  const Grid grid(warp);
  const index_t row0 =
      (index_t(batch) * params.heads_q + block.head) * params.seqlen_q + block.row0;
  float* accum = params.dq_accum + row0 * params.head_dim;  // (rows, head_dim)
#pragma unroll 1
  for (int col0 = grid.col0; col0 < grid.col0 + Grid::kCols; col0 += kPassCols) {
    acc_tile<Grid::kRows, kPassCols> dq;  // (queries, kPassCols)
    fill(dq, 0.0f);
    mma_atb(dq, tiles.ds_t, grid.row0, tiles.k, col0, lane);  // dQ = dS K
    for_each_element(dq, lane, [&](int r, int c, float& x) {
      const int row = grid.row0 + r, col = col0 + c;
      if (row < block.rows && col < params.head_dim) {
        atomic_add_global(accum, index_t(row) * params.head_dim + col, x);
      }
    });
  }
}

/// Grid (ceil(seqlen_k / kBlockN), heads_kv, batch), block kThreads, dynamic shared memory
/// Traits::kSharedBytes.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    attention_backward_dkdv_kernel(AttentionBackwardParams params) {
  using ScoreGrid = WarpGrid<Traits::kBlockN, Traits::kBlockM, Traits::kWarps>;  // (keys, queries)
  using KeyGrid = WarpGrid<Traits::kBlockN, Traits::kHeadDimPadded, Traits::kWarps>;  // (keys, d)
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const ScoreGrid scores(warp);
  const KeyGrid gradients(warp);
  const int sequence = blockIdx.z;  // `b` of the modifiers
  int batch = sequence;
  if constexpr (Traits::kVarlen) {  // its own sequence, as a dense batch of one
    rebase_to_sequence<typename Traits::Element>(params, batch);
    batch = 0;
  }
  const int key0 = int(blockIdx.x) * Traits::kBlockN;  // the block's first key
  const int keys = min_int(Traits::kBlockN, params.seqlen_k - key0);
  if (keys <= 0) return;  // past a shorter sequence's keys
  const int kv_head = blockIdx.y;
  const KeyWindow<Traits::kMask> window(params);
  // Keys no query sees are not loaded: their dK and dV are exactly zero. Nor, with a block
  // mask, the query blocks before the first or after the last that may see them.
  const BlockRange blocks = query_blocks_seeing<Traits::kBlockM>(
      params.block_mask, batch, kv_head * params.heads_per_kv, params.heads_per_kv, key0,
      key0 + keys, params.seqlen_q,
      window.query_blocks(key0, key0 + keys - 1, Traits::kBlockM, params.seqlen_q));

  QueryBlockPipeline<Traits> pipeline(params, batch, kv_head, blocks);
  acc_tile<KeyGrid::kRows, KeyGrid::kCols> dk, dv;  // (keys, d) blocks of this warp
  fill(dk, 0.0f);
  fill(dv, 0.0f);
  if (pipeline.steps() > 0) pipeline.start(params, key0, keys);
  for (int step = 0; step < pipeline.steps(); ++step) {
    const QueryBlock<Traits> block = pipeline.await(step);  // Qᵢ, dOᵢ of one head
    score_gradients(params, window, pipeline, block, batch, sequence, key0, scores,
                    lane);  // Pᵀ, dSᵀ
    __syncthreads();        // every warp's blocks of Pᵀ and dSᵀ are in shared memory
    mma_ab(dv, pipeline.p_t, gradients.row0, block.dout, gradients.col0, lane);  // dV += Pᵀ dO
    mma_ab(dk, pipeline.ds_t, gradients.row0, block.q, gradients.col0, lane);    // dK += dSᵀ Q
    if constexpr (Traits::kAtomicDq) {
      add_query_gradients(params, pipeline, block, batch, warp, lane);  // dQ += dS K
    }
    pipeline.release(step);
  }
  scale_tile(dk, params.scale);
  pipeline.store_key_gradients(dk, dv, params.dk, params.dv, key0, keys, gradients, lane);
}

}  // namespace flashjit
