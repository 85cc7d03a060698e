#pragma once
// The wide forward on Hopper's warpgroup MMA (sm_90a), for MLA's absorbed decoding: 64 packed
// (query, head) rows against a latent cache whose keys are 576 wide and whose values are the
// keys' first 512 columns. At 128 query heads each key byte feeds ~240 flops, near the tensor
// cores' ridge, so this kernel is built on wgmma, as FlashMLA is: O's 64 × 512 fp32 would take
// 256 registers a thread in one warpgroup, so two warpgroups each hold half of O's columns.
// Per block of 64 keys:
//  - warpgroup 0 computes S = Q Kᵀ (both operands in shared memory), the online softmax, and
//    publishes P (a swizzled tile) and each row's rescale factor α;
//  - each warpgroup rescales its half of O by α and adds P V over its half of V's columns
//    (warpgroup 0 with P from registers, warpgroup 1 from the shared tile), V read from the
//    key block itself.
// Warpgroup 1 copies the key blocks by cp.async one block ahead (wide_wgmma_loads.cuh), so a
// block of K (72 KB at 576) is in flight while the other is multiplied. Layouts (pages, packed
// heads, split-KV partials, left pads, cache rows) are ForwardBlock's, as in the mma.sync wide
// kernel (wide_forward_kernel.cuh); the split partials are merged by merge_states after it.
#include "attention/parts/epilogue.cuh"
#include "attention/parts/forward_softmax.cuh"
#include "attention/parts/mask.cuh"
#include "attention/wide/wide_wgmma_loads.cuh"
#include "attention/wide/wide_wgmma_traits.cuh"
#include "tile/mbarrier.cuh"
#include "tile/warpgroup_scope.cuh"

namespace flashjit {

/// Named barrier (bar.sync id; 0 is __syncthreads'): warpgroup 0 arrives when a block's P and
/// α are in shared memory, warpgroup 1 waits there before reading them.
enum : int { kWideProbabilitiesReady = 1 };

/// One value per row of a warp's 16 rows (as row_vec keeps them: the same on a quad's lanes) to
/// `rows[warp_row0 + r]` in shared memory, and back on any warp holding the same rows.
FJ_DEVICE void store_row_values(float* rows, const row_vec<16>& values, int warp_row0, int lane) {
  if (lane % 4 != 0) return;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    store_shared(rows, warp_row0 + fragment_row(0, half, lane), values.v[half]);
  }
}
FJ_DEVICE row_vec<16> load_row_values(const float* rows, int warp_row0, int lane) {
  row_vec<16> values;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    values.v[half] = load_shared(rows, warp_row0 + fragment_row(0, half, lane));
  }
  return values;
}

/// The kernel's shared memory, carved once.
template <class Traits>
struct WideWgmmaShared {
  using T = typename Traits::Element;
  swizzled_tile<T, Traits::kBlockM, Traits::kHeadDim> q;     // Q, then O on its way out
  swizzled_tile<T, Traits::kBlockN, Traits::kHeadDim> keys;  // slot 0 of two
  swizzled_tile<T, Traits::kBlockM, Traits::kBlockN> p;      // warpgroup 0's P, for warpgroup 1
  float* row_factor;  // [kBlockM]: a block's α, at the end 1/ℓ
  int* pages;         // [2][kBlockN]: two blocks' page-table entries

  FJ_DEVICE explicit WideWgmmaShared(unsigned char* base) {
    base = align_swizzle_atom(base);
    q = carve_tile<decltype(q)>(base);
    keys = {reinterpret_cast<T*>(base)};
    base += 2 * decltype(keys)::kBytes;
    p = carve_tile<decltype(p)>(base);
    row_factor = reinterpret_cast<float*>(base);
    pages = reinterpret_cast<int*>(base + Traits::kBlockM * 4);
  }

  /// Columns [half · kHalfV, (half + 1) · kHalfV) of a key slot: the warpgroup's V (whole
  /// panels, so the view is itself a swizzled tile).
  FJ_DEVICE swizzled_tile<T, Traits::kBlockN, Traits::kHalfV> values(
      swizzled_tile<T, Traits::kBlockN, Traits::kHeadDim> slot, int half) const {
    return {reinterpret_cast<T*>(slot.line(half * Traits::kHalfV / 64, 0))};
  }
};

/// Writes the tile's finished rows, each warpgroup its half of O's columns: with split-KV the
/// fp32 partials and LSEs (warpgroup 0) where ForwardBlock puts them; else O through Q's tile
/// (free once every S is done) as whole 16-byte chunks by the block, and the LSE.
template <class Traits>
FJ_DEVICE void store_wide_wgmma_outputs(const ForwardBlock<Traits>& block,
                                        const AttentionForwardParams& p,
                                        const WideWgmmaShared<Traits>& smem,
                                        acc_tile<16, Traits::kHalfV>& o, const row_vec<16>& lse,
                                        int group, int warp_row0, int lane) {
  using T = typename Traits::Element;
  const int column0 = group * Traits::kHalfV;
  if constexpr (Traits::Layout::kSplit) {
    store_rows_fp32(
        o, [&](int r) { return block.partial_o_row(p, r) + column0; }, warp_row0, block.rows,
        Traits::kHalfV, lane);
    if (group != 0) return;
    store_lse_to(
        lse, [&](int r) { return block.partial_lse_at(p, r); }, warp_row0, block.rows, lane);
  } else {
    __syncthreads();  // every S has read Q's tile
    store_fragments(o, smem.q, warp_row0, column0, lane);
    __syncthreads();  // both halves of every row are staged
    constexpr int kChunksPerRow = Traits::kHeadDimV / 8;
#pragma unroll 1
    for (int c = threadIdx.x; c < block.rows * kChunksPerRow; c += Traits::kThreads) {
      const int row = c / kChunksPerRow, col = c % kChunksPerRow * 8;
      const Chunk16 value = load_shared(reinterpret_cast<const Chunk16*>(smem.q.at(row, col)), 0);
      store_global_raw(reinterpret_cast<Chunk16*>(block.template query_row<T>(p.o, row) + col),
                       value);
    }
    if (p.lse == nullptr || group != 0) return;
    store_lse_to(
        lse, [&](int r) { return block.lse_at(p, r); }, warp_row0, block.rows, lane);
  }
}

/// After the last block: O /= ℓ in both warpgroups (warpgroup 0 has each row's ℓ and hands 1/ℓ
/// over) and the rows' LSE (warpgroup 0's; zeros in warpgroup 1).
template <class Traits>
FJ_DEVICE row_vec<16> finish_rows(OnlineSoftmax<16>& softmax, acc_tile<16, Traits::kHalfV>& o,
                                  const WideWgmmaShared<Traits>& smem, float scale, int group,
                                  int warp_row0, int lane) {
  __syncthreads();  // warpgroup 1 has read the last α
  row_vec<16> lse;
  fill(lse, 0.0f);
  if (group == 0) {
    lse = softmax.finish(o, scale);  // O /= ℓ
    row_vec<16> inverse;
#pragma unroll
    for (int half = 0; half < 2; ++half) inverse.v[half] = inverse_sum(softmax.sum.v[half]);
    store_row_values(smem.row_factor, inverse, warp_row0, lane);
  }
  __syncthreads();
  if (group == 1) mul_row(o, load_row_values(smem.row_factor, warp_row0, lane));
  return lse;
}

/// Grid as the forward kernel's (ForwardBlock, Br 64), block kThreads (two warpgroups), dynamic
/// shared memory Traits::kSharedBytes; one CTA an SM.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads, 1)
    attention_forward_wide_wgmma_kernel(AttentionForwardParams params) {
  using T = typename Traits::Element;
  const ForwardBlock<Traits> block(params);
  if (block.rows <= 0) return;  // past a shorter sequence's rows: nothing to do
  const int thread = threadIdx.x;
  const int group = WarpgroupScope{thread}.group();  // which half of O's columns
  const int lane = thread % kWarpSize;
  const int warp_row0 = thread % WarpgroupScope::kThreads / kWarpSize * 16;  // in both groups
  const int row0 = block.row0, rows = block.rows;
  const auto window = block.window(params);
  const BlockRange blocks = block.key_blocks(window);
  const float scale = exponent_scale<Traits::kSoftcap>(params);

  const WideWgmmaShared<Traits> smem(dynamic_shared<unsigned char>());
  // Warpgroup 1 copies the key blocks: its products wait for warpgroup 0's P anyway, while
  // warpgroup 0 goes from one block's S to the next with nothing else to issue.
  const LatentBlocks<Traits> loads(block, params, smem.keys, smem.pages, blocks.end,
                                   thread % WarpgroupScope::kThreads);
  acc_tile<16, Traits::kHalfV> o;  // this warp's rows of the warpgroup's half of O
  fill(o, 0.0f);
  OnlineSoftmax<16> softmax;  // warpgroup 0's: m, ℓ of the warp's rows
  if (!blocks.empty()) {
    load_swizzled_rows_async<Traits::kThreads>(
        smem.q, rows, [&](int r) { return block.template query_row<const T>(params.q, r); },
        static_cast<const T*>(params.q.data), thread);
    if (group == 1) {
      loads.load_pages(blocks.begin);
      loads.load_pages(blocks.begin + 1);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();  // Q and the first two blocks' page indices
    if (group == 1) {
      loads.load_keys(blocks.begin);
      cp_async_commit();
    }
  }
  for (int n = blocks.begin; n < blocks.end; ++n) {
    if (group == 1) cp_async_wait<0>();  // block n (and block n + 1's page indices)
    fence_proxy_async();  // written by cp.async (generic proxy), read by wgmma (async)
    __syncthreads();      // ... for every thread; and block n − 1's slot is free
    const auto keys = loads.slot(n);
    const int key0 = n * Traits::kBlockN;
    if (group == 0) {
      acc_tile<16, Traits::kBlockN> s;    // scores of the warp's rows, then their probabilities
      warpgroup_abt(s, smem.q, 0, keys);  // S = Q Kᵀ
      cap_scores<Traits::kSoftcap>(s, params);  // softcap
      if (!window.block_fully_visible(row0, row0 + rows - 1, key0, Traits::kBlockN)) {
        mask_scores(window, s, row0 + warp_row0, key0, lane);  // S = −inf where masked
      }
      const row_vec<16> alpha = softmax.fold(s, scale);  // P = 2^((S − m')·c), α = 2^((m − m')·c)
      mul_row(o, alpha);
      store_row_values(smem.row_factor, alpha, warp_row0, lane);
      store_fragments(s, smem.p, warp_row0, 0, lane);  // P, rounded as the product reads it
      fence_proxy_async();                             // generic writes, read by wgmma
      named_barrier_arrive(kWideProbabilitiesReady, Traits::kThreads);
      warpgroup_ab_async(o, to_operand<T>(s), smem.values(keys, 0));  // O += P V
    } else {
      loads.load_keys(n + 1);
      loads.load_pages(n + 2);
      cp_async_commit();
      named_barrier_sync(kWideProbabilitiesReady, Traits::kThreads);
      mul_row(o, load_row_values(smem.row_factor, warp_row0, lane));
      warpgroup_ab_async(o, smem.p, 0, smem.values(keys, 1));  // O += P V
    }
    wgmma_wait_group<0>();  // before the next block's barrier: its slot and P are reused
  }
  const row_vec<16> lse = finish_rows(softmax, o, smem, scale, group, warp_row0, lane);
  store_wide_wgmma_outputs(block, params, smem, o, lse, group, warp_row0, lane);
}

}  // namespace flashjit
