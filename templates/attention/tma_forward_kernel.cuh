#pragma once
// The warp-specialized Hopper forward (sm_90a), FlashAttention-3's structure (HOPPER-NOTES
// 1.2): a producer warpgroup, one of whose threads issues TMA loads, Q once on its own
// mbarrier, then K and V block by block into a ring of Stages slots; one to three consumer
// warpgroups of 64 query rows each wait for a full slot, compute S = Q Kᵀ (SS) and O += P V
// (RS, P from registers) on wgmma straight from the swizzled tiles TMA wrote, and release the
// slot (tma_forward_consumer.cuh, with the softmax overlapped with the products and pingpong
// between two warpgroups as options). Softmax, mask and softcap are the other forward
// kernels'.
//
// O leaves as FlashAttention-3's does: each warpgroup writes its rows into its own rows of Q's
// tile (only its own, finished, wgmmas read them) and one of its threads stores them with TMA,
// which skips rows past seqlen_q and columns past the head dim.
//
// With two or three consumer warpgroups the producer warpgroup gives registers to them
// (setmaxnreg, tma_forward_registers).
//
// Not done yet (FlashAttention-3 has them): cache hints, clusters and multicast, persistent
// scheduling, P through shared memory (SS) for O += P V.
#include "attention/tma_forward_consumer.cuh"

namespace flashjit {

/// Producer (one thread): Q once, then each key block's K and V into the next free slot.
template <class Traits>
FJ_DEVICE void load_query_keys_values(const TmaForwardShared<Traits>& smem,
                                      const AttentionTmaMaps& maps, const TmaForwardBlock& at) {
  if (at.keys.empty()) return;  // nothing to attend to: the consumers wait for nothing
  const int q_origin[4] = {0, at.row0, at.head, at.batch};  // (dim, row, head, batch)
  mbarrier_arrive_expect_tx(smem.q_full, Traits::QTile::kBytes);
  tma_load_tile(smem.q, maps.q, q_origin, smem.q_full);  // Q
  RingPosition<Traits::kStages> slot;
  for (int block = at.keys.begin; block < at.keys.end; ++block, slot.advance()) {
    mbarrier_t* full = smem.ring.acquire(slot, 2 * Traits::KVTile::kBytes);  // empty slot
    const int kv_origin[4] = {0, block * Traits::kBlockN, at.kv_head, at.batch};
    tma_load_tile(smem.k(slot.stage), maps.k, kv_origin, full);  // K
    tma_load_tile(smem.v(slot.stage), maps.v, kv_origin, full);  // V
  }
}

/// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), block Traits::kThreads (the consumer
/// warpgroups, then the producer warpgroup), dynamic shared memory Traits::kSharedBytes; `maps`
/// as AttentionTmaMaps documents.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    attention_forward_tma_kernel(AttentionForwardParams params,
                                 const FJ_GRID_CONSTANT AttentionTmaMaps maps) {
  const int thread = threadIdx.x;
  const TmaForwardBlock at = tma_forward_block<Traits>(params);
  const TmaForwardShared<Traits> smem =
      carve_tma_forward_shared<Traits>(dynamic_shared<unsigned char>());
  if (thread == 0) {
    mbarrier_init(smem.q_full, 1);
    smem.ring.init(Traits::kConsumerThreads);  // every consumer thread releases each slot
  }
  __syncthreads();  // the barriers are initialised

  constexpr bool kMoveRegisters = Traits::kConsumerRegisters > 0;
  if (thread < Traits::kConsumerThreads) {
    // The accumulators take the registers the producer gives up.
    if constexpr (kMoveRegisters) warpgroup_claim_registers<Traits::kConsumerRegisters>();
    if (thread / 128 * 64 >= at.rows) {
      pass_keys<Traits>(smem, at, thread);  // no row of this warpgroup is a query
    } else if constexpr (Traits::kOverlap) {
      attend_overlapped<Traits>(smem, params, maps, at, thread);
    } else {
      attend<Traits>(smem, params, maps, at, thread);
    }
  } else {
    if constexpr (kMoveRegisters) warpgroup_release_registers<Traits::kProducerRegisters>();
    if (thread == Traits::kConsumerThreads) load_query_keys_values<Traits>(smem, maps, at);
  }
}

}  // namespace flashjit
