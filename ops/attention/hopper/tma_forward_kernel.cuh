#pragma once
// The warp-specialized Hopper forward (sm_90a), FlashAttention-3's structure: a producer
// warpgroup, one of whose threads issues TMA loads, Q once on its own mbarrier, then K and V
// block by block, each into its own ring of Stages slots; one to three consumer warpgroups of
// 64 query rows each wait for a full slot, compute S = Q Kᵀ (SS) and O += P V (RS, P from
// registers) on wgmma straight from the swizzled tiles TMA wrote, and release K's slot once
// S = Q Kᵀ has read it and V's once P V has (tma_forward_consumer.cuh, with the softmax
// overlapped with the products and pingpong between two warpgroups as options). Softmax, mask
// and softcap are the other forward kernels'.
//
// O leaves as FlashAttention-3's does: each warpgroup writes its rows into its own rows of Q's
// tile (only its own, finished, wgmmas read them) and one of its threads stores them with TMA,
// which skips rows past seqlen_q and columns past the head dim.
//
// With two or three consumer warpgroups the producer warpgroup gives registers to them
// (setmaxnreg, tma_forward_registers).
//
// Tiles of (query block, head, batch), the longest causal ones first (tma_tile_schedule.cuh).
// Persistent, at most one CTA per SM walks them: the rings and Q's barriers carry on from one
// tile to the next, so the next tile's first K and V load under this tile's last steps. With a
// mask, whose tiles differ in length, a consumer thread takes them from a counter and hands
// them to the loader and the other consumers in shared memory (TileHandOver).
//
// Packed sequences (Varlen): each tile finds its sequence in the cu_seqlens arrays and O leaves
// by bounded stores (a TMA box would write into the next sequence). A last key block's box
// reads on past the sequence's keys: into the next sequence's rows, which a masked score
// multiplies by 0, or past the last sequence, into rows the caller may have left holding
// anything (a buffer larger than its sequences), where 0 · NaN would reach O. Those V lines are
// zeroed before the consumers see the block (load_values_past_end).
//
// Clusters of two CTAs (kClusterBlocks 2, unmasked, one CTA per tile): the two take
// consecutive query blocks of one (head, batch), so they walk the same key blocks in step; each
// producer loads half the rows of each K and V block and multicasts them into both CTAs' slots,
// so each CTA reads half its K and V from global memory (FlashAttention-3's, at head dims from
// 128). A slot is then filled from both CTAs: it is free once both CTAs' consumers have released
// it, which each signals in both CTAs' rings (ConsumerSlots).
//
// An fp8 (e4m3) cache (kKvE4m3, packed sequences): TMA brings K's and V's blocks as bytes and
// the producer warpgroup converts them into the rings' 16-bit slots (tma_forward_loads.cuh);
// the consumers fold k_descale into the score scale and v_descale into O.
//
// L2 cache hints as FlashAttention-3's: K and V blocks evict_last (the head's next query tiles
// read them again), Q evict_first (read once).
#include "attention/hopper/tma_forward_consumer.cuh"
#include "attention/hopper/tma_forward_loads.cuh"

namespace flashjit {

/// Producer (one thread; with an fp8 cache the producer warpgroup, ProducerLoads): for each of
/// this CTA's tiles, Q, then its key blocks' K and V, each into its own ring. The key blocks of
/// all the tiles form one stream, loaded in the order the consumers use them: block j+1's K
/// before block j's V (the consumers' step j+1 computes S = Q Kⱼ₊₁ᵀ together with O += Pⱼ Vⱼ).
/// The next tile's first K and V go out with this tile's last block, so they land while this
/// tile finishes. Q's tile holds O on its way out, so a tile's Q waits until the consumers have
/// stored the previous tile's O (q_empty); a tile with no key to visit loads nothing, but still
/// lets the consumers in (q_full) only then.
template <class Traits>
FJ_DEVICE void load_tiles(const TmaForwardShared<Traits>& smem,
                          const AttentionForwardParams& params, const AttentionTmaMaps& maps,
                          const TileSchedule<Traits>& tiles, int thread) {
  ProducerLoads<Traits> loads(smem, thread);
  RingPosition<Traits::kStages> k_slot, v_slot;
  bool first_loaded = false;  // the current tile's first K and V, loaded with the previous tile
  int tile = tiles.first();
  for (int n = 0; !tiles.done(tile); ++n) {  // the CTA's n-th tile
    const TmaForwardBlock at = tiles.block(params, tile);
    if (n > 0) {
      loads.flush();  // (the consumers may wait for it before they store O)
      mbarrier_wait_parity(smem.q_empty, unsigned(n - 1) & 1u);  // the last tile's O stored
    }
    if (at.keys.empty()) {
      if (loads.leader()) mbarrier_arrive(smem.q_full);  // nothing to load: O = 0 at once
      tile = tiles.after(smem.handed, tile, n + 1, true);
      continue;
    }
    if (loads.leader()) {
      const int q_origin[4] = {0, at.q_row0, at.head, at.tensor_batch};  // (dim, row, head, batch)
      mbarrier_arrive_expect_tx(smem.q_full, Traits::QTile::kBytes);
      tma_load_tile<L2Evict::first>(smem.q, maps.q, q_origin, smem.q_full);  // Q, read once
    }
    const int begin = at.keys.begin;
    if (!first_loaded) loads.key_block(smem.k_ring, k_slot, smem.k0, maps.k, at, begin);
    for (int block = begin; block + 1 < at.keys.end; ++block) {
      loads.key_block(smem.k_ring, k_slot, smem.k0, maps.k, at, block + 1);  // Kⱼ₊₁
      if (block != begin || !first_loaded) {
        loads.key_block(smem.v_ring, v_slot, smem.v0, maps.v, at, block);  // Vⱼ
      }
    }
    const int last = at.keys.end - 1, after = tiles.after(smem.handed, tile, n + 1, true);
    const TmaForwardBlock next = tiles.done(after) ? at : tiles.block(params, after);
    const bool more = !tiles.done(after) && !next.keys.empty();
    if (more) loads.key_block(smem.k_ring, k_slot, smem.k0, maps.k, next, next.keys.begin);
    if (last != begin || !first_loaded) loads.last_values(params, v_slot, maps.v, at, last);
    if (more) loads.key_block(smem.v_ring, v_slot, smem.v0, maps.v, next, next.keys.begin);
    first_loaded = more;
    tile = after;
  }
  loads.flush();
}

/// Consumer (a warpgroup): each of this CTA's tiles, once its Q has landed; then, by one thread
/// once the warpgroup's O has left Q's tile, lets the producer reuse it (q_empty).
template <class Traits>
FJ_DEVICE void attend_tiles(const TmaForwardShared<Traits>& smem,
                            const AttentionForwardParams& params, const AttentionTmaMaps& maps,
                            const TileSchedule<Traits>& tiles, int thread) {
  ConsumerSlots<Traits> slots;
  int n = 0;  // the CTA's n-th tile
  for (int tile = tiles.first(); !tiles.done(tile);) {
    // Taking tiles from the counter, the first thread takes the next one between tiles, where
    // the consumers have registers to spare (the producer warpgroup has none).
    if (TileSchedule<Traits>::kDynamic && thread == 0) {
      tiles.hand_over_next(params, smem.handed, n);
    }
    const TmaForwardBlock at = tiles.block(params, tile);
    mbarrier_wait_parity(smem.q_full, unsigned(n) & 1u);  // Q landed (or the tile has no key)
    // A warpgroup with no query row (a last, partly full block) passes the keys by. Persistent,
    // it computes on the zero rows TMA filled in instead, and stores nothing of them: a second
    // loop in the tile loop costs the main loop registers it does not have to spare.
    if (!Traits::kPersistent && WarpgroupScope{thread}.row0() >= at.rows) {
      pass_keys<Traits>(smem, at, slots, thread);
    } else if constexpr (Traits::kOverlap) {
      attend_overlapped<Traits>(smem, params, maps, at, slots, thread);
    } else {
      attend<Traits>(smem, params, maps, at, slots, thread);
    }
    if (WarpgroupScope{thread}.leader()) mbarrier_arrive(smem.q_empty);  // its O store read Q
    tile = tiles.after(smem.handed, tile, ++n, false);
  }
}

/// The kernel's body; the entry points below add only their launch attributes.
template <class Traits>
FJ_DEVICE void tma_forward(const AttentionForwardParams& params, const AttentionTmaMaps& maps) {
  const int thread = threadIdx.x;
  const TileSchedule<Traits> tiles(params);
  const TmaForwardShared<Traits> smem =
      carve_tma_forward_shared<Traits>(dynamic_shared<unsigned char>());
  if (thread == 0) {
    mbarrier_init(smem.q_full, 1);  // the producer's arrival (and Q's bytes)
    // Each consumer warpgroup's leader arrives once its O store has read Q's tile.
    mbarrier_init(smem.q_empty, Traits::kConsumerThreads / WarpgroupScope::kThreads);
    mbarrier_init(smem.v_tail, 1);  // the producer's arrival (and the V block's bytes)
    // The consumers release each slot kReleases times (ConsumerSlots: once a warpgroup and
    // block, or with an fp8 cache once a thread).
    // With an fp8 cache every producer thread fills each slot with its share of the conversion.
    constexpr unsigned kProducers = Traits::kKvE4m3 ? WarpgroupScope::kThreads : 1;
    smem.k_ring.init(ConsumerSlots<Traits>::kReleases, kProducers);
    smem.v_ring.init(ConsumerSlots<Traits>::kReleases, kProducers);
    // A staging slot is full once TMA's bytes land, free once every producer thread converted it.
    if constexpr (Traits::kKvE4m3) smem.staging_ring.init(WarpgroupScope::kThreads);
    // A taken tile's slot is free once the loader and every consumer thread have read it.
    if constexpr (TileSchedule<Traits>::kDynamic) {
      smem.handed.ring.init(Traits::kConsumerThreads + 1);
    }
  }
  // The barriers are initialised, in a cluster for the peers too, before anyone uses them.
  if constexpr (Traits::kClusterBlocks > 1) {
    cluster_sync();
  } else {
    __syncthreads();
  }

  constexpr bool kMoveRegisters = Traits::kConsumerRegisters > 0;
  if (thread < Traits::kConsumerThreads) {
    // The accumulators take the registers the producer gives up.
    if constexpr (kMoveRegisters) warpgroup_claim_registers<Traits::kConsumerRegisters>();
    attend_tiles<Traits>(smem, params, maps, tiles, thread);
  } else {
    if constexpr (kMoveRegisters) warpgroup_release_registers<Traits::kProducerRegisters>();
    // One thread issues the loads; with an fp8 cache the warpgroup converts them too.
    if (Traits::kKvE4m3 || thread == Traits::kConsumerThreads) {
      load_tiles<Traits>(smem, params, maps, tiles, thread);
    }
  }
  // A peer's last loads and releases reach into this CTA's shared memory: it stays until the
  // whole cluster is done.
  if constexpr (Traits::kClusterBlocks > 1) {
    __syncwarp();
    cluster_sync();
  }
}

/// Grid (tma_forward_ctas when persistent: at most one CTA per SM, each walking tiles as
/// TileSchedule says; else one CTA per tile, TileSchedule's count),
/// block Traits::kThreads (the consumer warpgroups, then the producer warpgroup), dynamic shared
/// memory Traits::kSharedBytes; `maps` as AttentionTmaMaps documents. One CTA a cluster.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    attention_forward_tma_kernel(AttentionForwardParams params,
                                 const FJ_GRID_CONSTANT AttentionTmaMaps maps) {
  static_assert(Traits::kClusterBlocks == 1, "clusters: attention_forward_tma_cluster_kernel");
  tma_forward<Traits>(params, maps);
}

/// The same in clusters of two CTAs along x (Traits::kClusterBlocks 2; the grid, TileSchedule's
/// count, is even).
template <class Traits>
FJ_GLOBAL void __cluster_dims__(2, 1, 1) __launch_bounds__(Traits::kThreads)
    attention_forward_tma_cluster_kernel(AttentionForwardParams params,
                                         const FJ_GRID_CONSTANT AttentionTmaMaps maps) {
  static_assert(Traits::kClusterBlocks == 2, "one CTA a cluster: attention_forward_tma_kernel");
  tma_forward<Traits>(params, maps);
}

}  // namespace flashjit
