#pragma once
// The fp8 forward (FlashAttention-3's fp8 contract on mma.sync, sm_89 on): Q, K and V in e4m3
// with fp32 descale factors, O in bf16. The loop is FlashAttention-2's (fa2/forward_kernel.cuh)
// with both products on m16n8k32 over e4m3: S = Q Kᵀ from the codes as they are, the online
// softmax in fp32 (ℓ sums the unrounded P), and O += P V with P rounded to e4m3 in registers
// and V transposed on its way in (fp8_forward_tiles.cuh). The descales are applied in fp32:
// q's and k's to the scores' scale, v's to the finished O.
#include "attention/fp8/fp8_forward_tiles.cuh"
#include "attention/parts/cache_descale.cuh"
#include "attention/parts/epilogue.cuh"
#include "attention/parts/forward_softmax.cuh"
#include "attention/parts/mask.cuh"
#include "tile/gemm.cuh"

namespace flashjit {

/// Rows [row0, ...) of a Vᵀ tile, as a tile of its own: one part of O's columns.
template <class Tile>
FJ_DEVICE Tile values_rows(Tile values_t, int row0) {
  return {values_t.at(row0, 0)};
}

/// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), block kThreads, dynamic shared memory
/// Traits::kSharedBytes.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    attention_forward_fp8_kernel(AttentionForwardParams params) {
  constexpr int kRows = Traits::kRowsPerWarp;
  // O's columns in parts of at most 128, each part's P V issued after the last part's: ptxas
  // otherwise loads every Vᵀ fragment of a block ahead of the first product (64 registers at
  // head dim 256, past what a thread has beside O).
  constexpr int kPartCols = Traits::kHeadDimPadded <= 128 ? Traits::kHeadDimPadded : 64;
  constexpr int kParts = Traits::kHeadDimPadded / kPartCols;
  const ForwardBlock<Traits> block(params);
  if (block.rows <= 0) return;
  const int thread = threadIdx.x, lane = thread % kWarpSize;
  const int warp_row0 = thread / kWarpSize * kRows;
  const int row0 = block.row0, rows = block.rows;
  const SequenceIndex& sequences = params.sequences;
  // q·k = (q_codes · k_codes) · q_descale · k_descale
  const float score_scale = params.score_scale *
                            descale_at(sequences.q_descale, block.batch, block.kv_head) *
                            descale_at(sequences.k_descale, block.batch, block.kv_head);
  const float exponent_scale = Traits::kSoftcap ? 1.0f : score_scale;  // scores to base-2 powers
  const auto window = block.window(params);
  const BlockRange blocks = block.key_blocks(window);
  const Fp8ForwardTiles<Traits> tiles(dynamic_shared<unsigned char>());
  const Fp8ForwardCopies<Traits> copies{block, params, tiles, thread};

  acc_tile<kRows, kPartCols> o[kParts];  // unnormalized output, in column parts
  for (auto& part : o) fill(part, 0.0f);
  OnlineSoftmax<kRows, kE4m3ProbabilityShift> softmax;  // m, ℓ; P in e4m3's range
  if (!blocks.empty()) {
    copies.queries(rows);  // in one group with the first keys
    copies.keys(blocks.begin);
    copies.values(blocks.begin);
  }
  for (int n = blocks.begin; n < blocks.end; ++n) {
    const int key0 = n * Traits::kBlockN;
    cp_async_wait<0>();                 // K_n and V_n (they had all of block n − 1 to land)
    tiles.transpose_values(n, thread);  // this thread's chunks of V_n into Vᵀ's slot n % 2
    __syncthreads();  // K_n and Vᵀ_n whole; every warp is done with block n − 1's slots
    if (n + 1 < blocks.end) {
      copies.keys(n + 1);
      copies.values(n + 1);
    }
    acc_tile<kRows, Traits::kBlockN> s;  // scores, then probabilities
    fill(s, 0.0f);
    mma_abt(s, tiles.q, warp_row0, tiles.keys(n), lane);                // S = Q Kᵀ
    cap_scores<Traits::kSoftcap>(s, params.softcap_log2, score_scale);  // softcap
    if (!window.block_fully_visible(row0, row0 + rows - 1, key0, Traits::kBlockN)) {
      mask_scores(window, s, row0 + warp_row0, key0, lane);  // S = −inf where masked
    }
    const row_vec<kRows> alpha = softmax.fold(s, exponent_scale);  // P = 2^((S − m)·c)
    const auto p = to_e4m3_operand(s);                             // P rounded to e4m3
#pragma unroll
    for (int part = 0; part < kParts; ++part) {
      mul_row(o[part], alpha);
      mma_abt(o[part], p, values_rows(tiles.values_t(n), part * kPartCols), lane);  // O += P V
      __syncwarp();  // the next part's loads of Vᵀ stay after this part's products
    }
  }
  const row_vec<kRows> lse = softmax.finish(o[0], exponent_scale);  // O /= ℓ
  const float v_descale = descale_at(sequences.v_descale, block.batch, block.kv_head);
  __syncthreads();  // every warp is done with the tiles O is staged over
#pragma unroll
  for (int part = 0; part < kParts; ++part) {
    if (part > 0) softmax.finish_summed(o[part], exponent_scale);
    for_each_in_row(o[part], [&](int, float& x) { x *= v_descale; });  // O = (P V_codes)·v_descale
    store_fragments(o[part], tiles.output, warp_row0, part * kPartCols, lane);
  }
  __syncwarp();
  store_rows_from_shared_to<kRows, Traits::kHeadDim>(
      [&](int r) { return block.template query_row<typename Traits::Output>(params.o, r); },
      tiles.output, warp_row0, rows - warp_row0, lane, params.head_dim_v);
  if (params.lse == nullptr) return;
  store_lse_to(
      lse, [&](int r) { return block.lse_at(params, r); }, warp_row0, rows, lane);
}

}  // namespace flashjit
