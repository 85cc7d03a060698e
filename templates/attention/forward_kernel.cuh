#pragma once
// FlashAttention-2 forward (DESIGN.md section 1): one CTA owns Br query rows of one head and
// streams the visible key blocks past them, keeping per row the running max m, sum ℓ and
// unnormalized output O. Each warp owns Br / warps of the rows; the CTA shares K and V.
#include "attention/epilogue.cuh"
#include "attention/forward_params.cuh"
#include "attention/forward_softmax.cuh"
#include "attention/key_value_pipeline.cuh"
#include "attention/mask.cuh"
#include "attention/query_operand.cuh"

namespace flashjit {

/// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), block kThreads, dynamic shared memory
/// Traits::kSharedBytes.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    attention_forward_kernel(AttentionForwardParams params) {
  using T = typename Traits::Element;
  constexpr int kRows = Traits::kRowsPerWarp;
  const int lane = threadIdx.x % kWarpSize;
  const int warp_row0 = threadIdx.x / kWarpSize * kRows;  // the warp's first row in the block
  const int row0 = int(blockIdx.x) * Traits::kBlockM;     // the block's first query row
  const int rows = min_int(Traits::kBlockM, params.seqlen_q - row0);  // valid rows in the block
  const int head = blockIdx.y, batch = blockIdx.z;
  const HeadSlice<T> slice =
      head_slice<T>(params, params.o, lse_rows(params, batch, head, row0), batch, head, row0);
  const KeyWindow<Traits::kMask> window(params);
  const BlockRange blocks = window.key_blocks(row0, row0 + rows - 1, Traits::kBlockN);

  KeyValuePipeline<Traits> pipeline(slice, params.seqlen_k, blocks.end);
  QueryOperand<Traits> query(pipeline.q, warp_row0);  // Q, from shared memory or registers
  acc_tile<kRows, Traits::kHeadDimPadded> o;          // (kRows, kHeadDimPadded) unnormalized output
  fill(o, 0.0f);
  OnlineSoftmax<kRows> softmax;  // m, ℓ
  if (!blocks.empty()) pipeline.start(rows, blocks.begin);
  for (int block = blocks.begin; block < blocks.end; ++block) {
    const int key0 = block * Traits::kBlockN;
    acc_tile<kRows, Traits::kBlockN> s;  // (kRows, kBlockN) scores, then probabilities
    fill(s, 0.0f);
    const auto keys = pipeline.await_keys(block);
    if (block == blocks.begin) query.arrived(lane);  // Q came with the first key block
    query.scores(s, keys, lane);                     // S = Q Kᵀ
    cap_scores<Traits::kSoftcap>(s, params);         // softcap
    if (!window.block_fully_visible(row0, row0 + rows - 1, key0, Traits::kBlockN)) {
      mask_scores(window, s, row0 + warp_row0, key0, lane);  // S = −inf where masked
    }
    softmax.update(s, o, exponent_scale<Traits::kSoftcap>(params));   // P = 2^((S − m)·c), O·α
    mma_ab(o, to_operand<T>(s), pipeline.await_values(block), lane);  // O += P V
  }
  const row_vec<kRows> lse = softmax.finish(o, exponent_scale<Traits::kSoftcap>(params));  // O /= ℓ
  store_rows<Traits::kHeadDim>(o, pipeline.q, slice.out, slice.out_row_stride, warp_row0, rows,
                               lane);
  store_lse(lse, slice.lse, warp_row0, rows, lane);
}

}  // namespace flashjit
