#pragma once
// FlashAttention-2 forward (docs/design.md): one CTA owns Br query rows of one head and
// streams the visible key blocks past them, keeping per row the running max m, sum ℓ and
// unnormalized output O. Each warp owns Br / warps of the rows; the CTA shares K and V.
// Inference layouts (variable lengths, paged K/V, GQA packing, split-KV) change only which
// rows and keys a CTA has and where they live (attention/parts/forward_block.cuh), not the loop.
#include "attention/fa2/forward_rows.cuh"
#include "attention/fa2/query_operand.cuh"
#include "attention/parts/dropout_tiles.cuh"
#include "attention/parts/forward_softmax.cuh"
#include "attention/parts/mask.cuh"
#include "attention/parts/modifiers.cuh"

namespace flashjit {

/// Grid (ceil(rows / kBlockM) · splits, heads, batch) as ForwardBlock says (for a dense batch
/// (ceil(seqlen_q / kBlockM), heads_q, batch)), block kThreads, dynamic shared memory
/// Traits::kSharedBytes.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    attention_forward_kernel(AttentionForwardParams params) {
  using T = typename Traits::Element;
  using Modifiers = typename Traits::Modifiers;
  constexpr int kRows = Traits::kRowsPerWarp;
  // A score modifier leaves the scores in the base-2 domain, as softcap does.
  constexpr bool kScaled = Traits::kSoftcap || Modifiers::kScore;
  const ForwardBlock<Traits> block(params);  // the sequence, rows, keys and split of this CTA
  if (block.rows <= 0) return;               // past a shorter sequence's rows: nothing to do
  // An fp8 cache's K is its true values over k_descale: q·k = (q·k_stored) · k_descale.
  if constexpr (Traits::Layout::kKvE4m3) params.score_scale *= block.k_descale;
  const int lane = threadIdx.x % kWarpSize;
  const int warp_row0 = threadIdx.x / kWarpSize * kRows;  // the warp's first row in the block
  const int row0 = block.row0, rows = block.rows;
  const auto window = block.window(params);
  const BlockRange blocks = block.key_blocks(window);

  KeyValuePipeline<Traits, decltype(forward_rows(block, params))> pipeline(
      forward_rows(block, params), blocks.end);
  QueryOperand<Traits> query(pipeline.q, warp_row0);  // Q, from shared memory or registers
  acc_tile<kRows, Traits::kHeadDimPadded> o;          // (kRows, kHeadDimPadded) unnormalized output
  fill(o, 0.0f);
  OnlineSoftmax<kRows> softmax;  // m, ℓ
  if (!blocks.empty()) pipeline.start(rows, blocks.begin);
  for (int block_n = blocks.begin; block_n < blocks.end; ++block_n) {
    const int key0 = block_n * Traits::kBlockN;
    acc_tile<kRows, Traits::kBlockN> s;  // (kRows, kBlockN) scores, then probabilities
    fill(s, 0.0f);
    const auto keys = pipeline.await_keys(block_n);
    if (block_n == blocks.begin) query.arrived(lane);       // Q came with the first key block
    query.scores(s, keys, lane);                            // S = Q Kᵀ
    cap_scores<Traits::kSoftcap>(s, params);                // softcap
    if constexpr (Modifiers::kScore || Modifiers::kMask) {  // the caller's score_mod, mask_mod
      const float to_natural = (Traits::kSoftcap ? 1.0f : params.score_scale) * kLn2;
      modify_scores<Modifiers>(s, block, warp_row0, key0, to_natural, block.mask_needed(key0),
                               params.captures, lane);
    }
    if (!window.block_fully_visible(row0, row0 + rows - 1, key0, Traits::kBlockN)) {
      mask_scores(window, s, row0 + warp_row0, key0, lane);  // S = −inf where masked
    }
    softmax.update(s, o, exponent_scale<kScaled>(params));  // P = 2^((S − m)·c), O·α
    if constexpr (Modifiers::kDropout) {  // after ℓ summed the undropped P
      drop_probabilities(
          s, params.dropout, [&](int r) { return block.query(warp_row0 + r); },
          [&](int r) { return block.batch * params.heads_q + block.query_head(warp_row0 + r); },
          key0, lane);
    }
    mma_ab(o, to_operand<T>(s), pipeline.await_values(block_n), lane);  // O += P V
  }
  const row_vec<kRows> lse = softmax.finish(o, exponent_scale<kScaled>(params));  // O /= ℓ
  if constexpr (Modifiers::kDropout) {  // the kept P's 1 / (1 − p)
    for_each_in_row(o, [&](int, float& x) { x *= params.dropout.scale; });
  }
  if constexpr (Traits::Layout::kKvE4m3) {  // likewise V: O = (P V_stored) · v_descale
    for_each_in_row(o, [&](int, float& x) { x *= block.v_descale; });
  }
  store_forward_outputs(block, params, o, lse, pipeline.q, warp_row0, lane);  // O and LSE
}

}  // namespace flashjit
