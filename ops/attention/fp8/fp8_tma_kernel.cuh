#pragma once
// The fp8 forward on sm_90a (FlashAttention-3's fp8 contract and structure): Q, K and V in e4m3
// with fp32 descales, O in bf16, both products on wgmma's m64nNk32 over e4m3. A producer
// warpgroup brings Q and K by TMA and transposes V into Vᵀ (fp8_tma_loads.cuh); one or two
// consumer warpgroups of 64 query rows run the 16-bit TMA forward's consumer loops
// (tma_forward_consumer.cuh; up to a padded head dim of 128 the overlapped one: S = Q Kᵀ of a
// block issued with the previous block's O += P V, the softmax under that product, pingpong as
// an option), with P rounded to e4m3 in registers (to_e4m3_operand) and V read as Vᵀ, K-major. The descales are applied in fp32: q's and k's to
// the scores' scale, v's to the finished O. One CTA a tile of (query block, head, batch), tiles
// in TileSchedule's order.
//
// Not done yet (the 16-bit TMA forward has them): the persistent schedule, clusters.
#include "attention/fp8/fp8_tma_loads.cuh"
#include "attention/hopper/tma_forward_consumer.cuh"

namespace flashjit {

/// Producer warpgroup: the tile's Q, then block by block its K and V. A tile with no key to
/// visit loads nothing but lets the consumers in at once (O = 0).
template <class Traits>
FJ_DEVICE void load_fp8_tile(const Fp8TmaShared<Traits>& smem, const AttentionTmaMaps& maps,
                             const TmaForwardBlock& at, int thread) {
  Fp8TmaLoads<Traits> loads(smem, maps, thread);
  if (at.keys.empty()) {
    if (loads.leader()) mbarrier_arrive(smem.q_full);
    return;
  }
  loads.queries(at);
  for (int block = at.keys.begin; block < at.keys.end; ++block) {
    loads.keys(at, block);
    loads.values(at, block);
  }
  loads.flush();
}

/// A consumer warpgroup's epilogue (the overload the 16-bit forward's consumer loops call for
/// this kernel's shared memory): LSE straight out; O (descaled) into the warpgroup's staging
/// slot as bf16, then one TMA store of its 64 rows (rows past seqlen_q and columns past the
/// head dim are not written), waited for before the CTA may exit.
template <class Traits>
FJ_DEVICE void write_outputs(const acc_tile<16, Traits::kHeadDimPadded>& o, const row_vec<16>& lse,
                             const Fp8TmaShared<Traits>& smem, const AttentionForwardParams& params,
                             const AttentionTmaMaps& maps, const TmaForwardBlock& at, int thread) {
  const WarpgroupScope scope{thread};
  store_lse(lse, lse_rows(params, at.tensor_batch, at.head, at.q_row0), scope.warp_row0(), at.rows,
            scope.lane());
  const typename Traits::OutputTile out = smem.output(scope.group());
  store_fragments(o, out, scope.warp_row0() - scope.row0(), 0, scope.lane());
  store_warpgroup_rows(out, 0, maps, at, scope);
}

/// Grid TileSchedule's count of tiles (⌈seqlen_q / Br⌉ · heads_q · batch), block
/// Traits::kThreads (the consumer warpgroups, then the producer warpgroup), dynamic shared
/// memory Traits::kSharedBytes; `maps` as AttentionTmaMaps documents, with Q and K as 16-bit
/// elements of two codes (head_dim / 2 of them a row), V as bytes in boxes of kHeadDimPadded
/// codes by Bc rows without swizzle, O bf16.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    attention_forward_fp8_tma_kernel(AttentionForwardParams params,
                                     const FJ_GRID_CONSTANT AttentionTmaMaps maps) {
  const int thread = threadIdx.x;
  const TileSchedule<Traits> tiles(params);
  const TmaForwardBlock at = tiles.block(params, tiles.first());
  const Fp8TmaShared<Traits> smem = carve_fp8_tma_shared<Traits>(dynamic_shared<unsigned char>());
  if (thread == 0) {
    mbarrier_init(smem.q_full, 1);  // the producer's arrival (and Q's bytes)
    smem.k_ring.init(Traits::kConsumerThreads);
    // Every producer thread writes its share of each Vᵀ slot and reads its share of each
    // staging slot.
    smem.v_ring.init(Traits::kConsumerThreads, WarpgroupScope::kThreads);
    smem.staging_ring.init(WarpgroupScope::kThreads);
  }
  __syncthreads();
  constexpr bool kMoveRegisters = Traits::kRegisters.consumer > 0;
  if (thread < Traits::kConsumerThreads) {
    if constexpr (kMoveRegisters) warpgroup_claim_registers<Traits::kRegisters.consumer>();
    ConsumerSlots<Traits> slots;
    mbarrier_wait_parity(smem.q_full, 0);  // Q landed (or the tile has no key)
    // A warpgroup with no query row (a last, partly full block) computes on the zero rows TMA
    // filled in and stores nothing of them.
    if constexpr (Traits::kOverlap) {
      attend_overlapped<Traits>(smem, params, maps, at, slots, thread);
    } else {
      attend<Traits>(smem, params, maps, at, slots, thread);
    }
  } else {
    if constexpr (kMoveRegisters) warpgroup_release_registers<Traits::kRegisters.producer>();
    load_fp8_tile<Traits>(smem, maps, at, thread);
  }
}

}  // namespace flashjit
