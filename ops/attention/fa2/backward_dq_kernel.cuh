#pragma once
// Backward, dQ (docs/design.md): one CTA owns Br query rows of one head and streams the
// visible key blocks past them like the forward pass, recomputing P from the saved LSE:
// dQ = scale · Σⱼ (P ∘ (dO Vⱼᵀ − D)) Kⱼ. It writes dQ once, without atomics, so gradients
// are the same bits on every run.
#include "attention/fa2/backward_traits.cuh"
#include "attention/fa2/key_value_pipeline.cuh"
#include "attention/parts/backward_scores.cuh"
#include "attention/parts/backward_sequence.cuh"
#include "attention/parts/block_mask_ranges.cuh"
#include "attention/parts/dropout_tiles.cuh"
#include "attention/parts/epilogue.cuh"
#include "attention/parts/mask.cuh"
#include "attention/parts/modifiers.cuh"
#include "tile/gemm.cuh"

namespace flashjit {

/// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), block kThreads, dynamic shared memory
/// Traits::kSharedBytes.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    attention_backward_dq_kernel(AttentionBackwardParams params) {
  using T = typename Traits::Element;
  using Pipeline = KeyValuePipeline<Traits>;
  constexpr int kRows = Traits::kQueryRowsPerWarp;
  const int lane = threadIdx.x % kWarpSize;
  const int warp_row0 = threadIdx.x / kWarpSize * kRows;
  const int sequence = blockIdx.z;  // `b` of the modifiers
  int batch = sequence;
  if constexpr (Traits::kVarlen) {  // its own sequence, as a dense batch of one
    rebase_to_sequence<T>(params, batch);
    batch = 0;
  }
  const int row0 = int(blockIdx.x) * Traits::kBlockM;
  const int rows = min_int(Traits::kBlockM, params.seqlen_q - row0);
  if (rows <= 0) return;  // past a shorter sequence's rows
  const int head = blockIdx.y;
  const HeadSlice<T> slice = head_slice<T>(params, params.dq, nullptr, batch, head, row0);
  const KeyWindow<Traits::kMask> window(params);
  // The key blocks its rows see, cut to what a block mask leaves.
  const BlockRange blocks =
      masked_keys(params.block_mask, batch, head, row0, rows, params.seqlen_k)
          .key_blocks<Traits::kBlockN>(window.key_blocks(row0, row0 + rows - 1, Traits::kBlockN));

  Pipeline pipeline({slice, params.seqlen_k, params.head_dim_v}, blocks.end);
  unsigned char* after_pipeline = dynamic_shared<unsigned char>() + Pipeline::kBytes;
  const auto dout = carve_tile<typename Pipeline::QTile>(after_pipeline);  // (kBlockM, d)
  // (dO and V are zero past head_dim_v: dP = dO Vᵀ sums the real columns.)
  const index_t stats = (index_t(batch) * params.heads_q + head) * params.seqlen_q + row0;
  row_vec<kRows> lse, delta;  // per row: LSE in base 2, D
#pragma unroll
  for (int r = 0; r < kRows / 16 * 2; ++r) {
    const int row = warp_row0 + fragment_row(r / 2, r % 2, lane);
    const bool valid = row < rows;
    lse.v[r] = valid ? lse_base2(load_global(lse_rows(params, batch, head, row0), row))
                     : -negative_infinity();
    delta.v[r] = valid ? load_global(params.delta + stats, row) : 0.0f;
  }
  acc_tile<kRows, Traits::kHeadDimPadded> dq;  // (kRows, d)
  fill(dq, 0.0f);
  if (!blocks.empty()) {
    const T* dout_rows = params.dout.rows<const T>(batch, head, row0);
    load_tile_async<Traits::kThreads>(dout, dout_rows, params.dout.row_stride, rows,
                                      params.head_dim_v, int(threadIdx.x));
    pipeline.start(rows, blocks.begin);  // dO joins the first commit group
  }
  for (int block = blocks.begin; block < blocks.end; ++block) {
    const int key0 = block * Traits::kBlockN;
    const auto k = pipeline.await_keys(block);
    acc_tile<kRows, Traits::kBlockN> p;  // (kRows, kBlockN) scores, then probabilities
    fill(p, 0.0f);
    mma_abt(p, pipeline.q, warp_row0, k, lane);  // S = Q Kᵀ
    ScoreScaling<Traits::kSoftcap, kRows, Traits::kBlockN> scaling;
    scaling.scale(p, params);                  // S·scale·log2 e
    const auto position = [&](int r, int c) {  // of element (r, c)
      const int row = warp_row0 + r, key = key0 + c;
      return ScorePosition{row < rows && key < params.seqlen_k, head, row0 + row, key};
    };
    ModifiedScores<typename Traits::Modifiers, kRows, Traits::kBlockN> modified;
    modified.apply(p, sequence, position, params.captures, lane);  // score_mod, mask_mod
    if (!window.block_fully_visible(row0, row0 + rows - 1, key0, Traits::kBlockN)) {
      mask_scores(window, p, row0 + warp_row0, key0, lane);  // S = −inf where masked
    }
    exp2_sub_row(p, lse);                 // P = 2^(S − LSE)
    acc_tile<kRows, Traits::kBlockN> ds;  // (kRows, kBlockN) dP, then dS
    fill(ds, 0.0f);
    mma_abt(ds, dout, warp_row0, pipeline.await_values(block), lane);  // dP = dO Vᵀ
    if constexpr (Traits::Modifiers::kDropout) {  // dS = P ∘ (dP ∘ Z − D)
      dropout_score_gradients(p, ds, delta, params.dropout, sequence * params.heads_q + head,
                              row0 + warp_row0, key0, lane);
    } else {
      sub_row(ds, delta), mul_elements(ds, p);  // dS = P ∘ (dP − D)
    }
    modified.chain(ds, lane);                // through score_mod
    scaling.chain(ds);                       // through softcap
    mma_ab(dq, to_operand<T>(ds), k, lane);  // dQ += dS K
  }
  scale_tile(dq, params.scale);
  store_rows<Traits::kHeadDim>(dq, pipeline.q, slice.out, slice.out_row_stride, warp_row0, rows,
                               lane);
}

}  // namespace flashjit
