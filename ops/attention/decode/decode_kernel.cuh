#pragma once
// The decode kernel: attention for a few query rows per (sequence, key/value head) against a
// long cache, built to keep memory busy rather than the tensor cores (docs/inference.md, "The
// decode kernel"). One CTA holds the packed (query, head) rows of one key/value head (the GQA
// group times the query tokens) and a share of the keys; each warp holds all of the rows and
// streams its own chunks of keys through its own ring of kStages slots (DecodeRing), so every
// warp keeps kStages − 1 chunks in flight with no block barrier in the loop. The rows are the
// products' small dimension (Sᵀ = K Qᵀ, Oᵀ += Vᵀ Pᵀ: decode_columns.cuh), so a GQA group of 8 fills
// an mma tile with no padding rows. The warps' results
// are merged with the exact LSE combiner at the end, and with split-KV the last CTA of a
// (sequence, head) merges the splits in the same launch (DecodeMerge).
#include "attention/decode/decode_columns.cuh"
#include "attention/decode/decode_merge.cuh"
#include "attention/decode/decode_ring.cuh"
#include "attention/decode/decode_traits.cuh"
#include "attention/parts/forward_softmax.cuh"  // cap_scores, exponent_scale
#include "attention/parts/mask.cuh"
#include "attention/parts/modifiers.cuh"
#include "tile/semaphore.cuh"

namespace flashjit {

/// A warp's Q as the B operand of Sᵀ = K Qᵀ: fragments per 8-row group and 16-column step, in
/// registers (loaded once) or read from the shared tile for every chunk.
template <class Traits, bool InRegisters = Traits::kQInRegisters>
struct DecodeQuery {
  using QTile = smem_tile<typename Traits::Element, Traits::kRows, Traits::kHeadDimPadded>;
  QTile tile;
  int lane;
  FJ_DEVICE DecodeQuery(QTile tile_, int lane_) : tile(tile_), lane(lane_) {}
  FJ_DEVICE FragmentB operator()(int group, int step) const {
    return load_b_rows(tile, group * 8, step * 16, lane);
  }
};
template <class Traits>
struct DecodeQuery<Traits, true> {
  using QTile = smem_tile<typename Traits::Element, Traits::kRows, Traits::kHeadDimPadded>;
  FragmentB frag[Traits::kRows / 8][Traits::kHeadDimPadded / 16];
  FJ_DEVICE DecodeQuery(QTile tile, int lane) {
#pragma unroll
    for (int group = 0; group < Traits::kRows / 8; ++group)
#pragma unroll
      for (int step = 0; step < Traits::kHeadDimPadded / 16; ++step) {
        frag[group][step] = load_b_rows(tile, group * 8, step * 16, lane);
      }
  }
  FJ_DEVICE const FragmentB& operator()(int group, int step) const { return frag[group][step]; }
};

/// Grid (ceil(rows / kRows) · splits, heads_kv (heads_q without GQA packing), batch) as
/// ForwardBlock says, block kThreads, dynamic shared memory Traits::kSharedBytes.
/// One CTA an SM is what the rings are sized for; said to ptxas, which otherwise aims some
/// 8-warp specializations at three CTAs' registers and spills (sm_80, head dim 64: 80
/// registers and 4 bytes spilled, 101 and none with the bound).
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads, 1)
    attention_decode_kernel(AttentionForwardParams params) {
  using T = typename Traits::Element;
  using Modifiers = typename Traits::Modifiers;
  constexpr int kRows = Traits::kRows;
  // A score modifier leaves the scores in the base-2 domain, as softcap does.
  constexpr bool kScaled = Traits::kSoftcap || Modifiers::kScore;
  using QTile = smem_tile<T, kRows, Traits::kHeadDimPadded>;
  // Launched to overlap the grid before it (an append, the caller's last kernel): nothing
  // global is touched until that grid is done.
  wait_for_previous_grid();
  const ForwardBlock<Traits> block(params);  // the sequence, rows, keys and split of this CTA
  if (block.rows <= 0) return;               // past a shorter sequence's rows: nothing to do
  // An fp8 cache's K is its true values over k_descale: q·k = (q·k_stored) · k_descale.
  if constexpr (Traits::Layout::kKvE4m3) params.score_scale *= block.k_descale;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const auto window = block.window(params);
  const BlockRange chunks = block.key_blocks(window);  // in chunks of kKeys keys

  unsigned char* shared = dynamic_shared<unsigned char>();
  const QTile q_tile = carve_tile<QTile>(shared);
  DecodeRing<Traits> ring(shared, block, params, chunks, warp);
  // Q and the first chunks' page indices: the one wait no copy overlaps.
  load_tile_rows_async<Traits::kThreads>(
      q_tile, [&](int r) { return block.template query_row<const T>(params.q, r); },
      static_cast<const T*>(params.q.data), block.rows, Traits::kHeadDim, threadIdx.x);
  ring.load_first_pages();
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  ring.start();
  const DecodeQuery<Traits> query(q_tile, lane);

  acc_tile<Traits::kHeadDimPadded, kRows> o_t;  // this warp's unnormalized Oᵀ
  fill(o_t, 0.0f);
  ColumnSoftmax<kRows> softmax;  // m, ℓ over this warp's keys, a column per query row
  const float scale = exponent_scale<kScaled>(params);
  for (int i = 0; i < ring.chunks; ++i) {
    const int slot = ring.await(i);  // chunk i here, chunk i + kStages − 1 started
    const int key0 = ring.key0(i);
    acc_tile<Traits::kKeys, kRows> s_t;
    fill(s_t, 0.0f);
    add_scores_transposed<T, Traits::kHeadDimPadded>(s_t, ring.keys(slot), query, lane);  // Sᵀ
    cap_scores<Traits::kSoftcap>(s_t, params);                                            // softcap
    if constexpr (Modifiers::kScore || Modifiers::kMask) {  // the caller's score_mod, mask_mod
      const float to_natural = (Traits::kSoftcap ? 1.0f : params.score_scale) * kLn2;
      modify_scores_transposed<Modifiers>(s_t, block, 0, key0, to_natural, block.mask_needed(key0),
                                          params.captures, lane);
    }
    if (!window.block_fully_visible(block.row0, block.row0 + block.rows - 1, key0, Traits::kKeys)) {
      mask_scores_transposed(window, s_t, key0, block.row0, lane);  // Sᵀ = −inf where masked
    }
    softmax.update(s_t, o_t, scale);  // Pᵀ = 2^((Sᵀ − m)·c), Oᵀ·α
    add_values_transposed(o_t, ProbabilitiesB<T, Traits::kKeys, kRows>(s_t, lane),
                          ring.values(slot), lane);  // Oᵀ += Vᵀ Pᵀ
  }
  cp_async_wait<0>();  // the ring's trailing (empty) groups
  allow_next_grid();   // only the merges are left: the next grid's launch may begin
  const col_vec<kRows> lse = softmax.finish(o_t, scale);  // Oᵀ /= ℓ
  if constexpr (Traits::Layout::kKvE4m3) {  // likewise V: O = (P V_stored) · v_descale
    for_each_in_row(o_t, [&](int, float& x) { x *= block.v_descale; });
  }

  __syncthreads();  // every warp is done with its ring: the merge takes the rings' place
  const DecodeMerge<Traits> merge(shared);
  merge.keep(warp, o_t, lse, lane);
  __syncthreads();
  merge.weigh_warps(block.rows);
  __syncthreads();
  if constexpr (Traits::Layout::kSplit) {
    if (merge.store_partial_and_arrive(block, params)) merge.merge_splits(block, params);
  } else {
    merge.store_output(block, params);
  }
}

}  // namespace flashjit
