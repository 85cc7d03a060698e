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
// tile to the next, so the next tile's first K and V load under this tile's last steps, and,
// where shared memory holds a second Q slot (tma_forward_q_slots), so does its Q. With a
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

/// Producer: waits until the CTA's n-th tile's Q slot (TmaForwardShared::for_tile) is free, its
/// last tile's O stored (q_empty).
template <class Traits>
FJ_DEVICE void wait_query_slot(const TmaForwardShared<Traits>& smem, ProducerLoads<Traits>& loads,
                               int n) {
  if (n > 0) loads.flush();  // (the consumers may wait for it before they store O)
  if (n >= Traits::kQSlots) {
    mbarrier_wait_parity(smem.for_tile(n).q_empty, unsigned(n / Traits::kQSlots - 1) & 1u);
  }
}

/// Producer: the CTA's n-th tile's Q into its free slot.
template <class Traits>
FJ_DEVICE void load_query(const TmaForwardShared<Traits>& smem, const AttentionTmaMaps& maps,
                          const ProducerLoads<Traits>& loads, const TmaForwardBlock& at, int n) {
  if (!loads.leader()) return;
  const TmaForwardShared<Traits> q_slot = smem.for_tile(n);
  const int q_origin[4] = {0, at.q_row0, at.head, at.tensor_batch};  // (dim, row, head, batch)
  mbarrier_arrive_expect_tx(q_slot.q_full, Traits::QTile::kBytes);
  tma_load_tile<L2Evict::first>(q_slot.q, maps.q, q_origin, q_slot.q_full);  // Q, read once
}

/// Producer (one thread; with an fp8 cache the producer warpgroup, ProducerLoads): for each of
/// this CTA's tiles, Q, then its key blocks' K and V, each into its own ring. The key blocks of
/// all the tiles form one stream, loaded in the order the consumers use them: block j+1's K
/// before block j's V (the consumers' step j+1 computes S = Q Kⱼ₊₁ᵀ together with O += Pⱼ Vⱼ).
/// The next tile's first K and V go out with this tile's last block, so they land while this
/// tile finishes. Q's slot holds O on its way out (wait_query_slot): with two slots the next tile's
/// Q goes out with them too, before its first V (which S = Q Kᵀ does not need), so it lands
/// under this tile's last products; with one it waits for this tile's O at the next tile's
/// start, where the next tile's first K and V are already on their way.
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
    // (With two Q slots a tile's Q went out with the last tile's blocks, unless it has no key.)
    if (Traits::kQSlots == 1 || !first_loaded) {
      wait_query_slot(smem, loads, n);
      if (at.keys.empty()) {  // nothing to load: O = 0 at once
        if (loads.leader()) mbarrier_arrive(smem.for_tile(n).q_full);
        tile = tiles.after(smem.handed, tile, n + 1, true);
        continue;
      }
      load_query(smem, maps, loads, at, n);
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
    if (Traits::kQSlots == 2 && more) {
      wait_query_slot(smem, loads, n + 1);
      load_query(smem, maps, loads, next, n + 1);
    }
    if (more) loads.key_block(smem.v_ring, v_slot, smem.v0, maps.v, next, next.keys.begin);
    first_loaded = more;
    tile = after;
  }
  loads.flush();
}

/// Consumer (a warpgroup): each of this CTA's tiles, once its Q has landed; then, by one thread
/// once the warpgroup's O has left the tile's Q slot, lets the producer reuse it (q_empty).
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
    const TmaForwardShared<Traits> tile_smem = smem.for_tile(n);  // (its Q slot)
    // Q landed (or the tile has no key)
    mbarrier_wait_parity(tile_smem.q_full, unsigned(n / Traits::kQSlots) & 1u);
    // A warpgroup with no query row (a last, partly full block) passes the keys by. Persistent,
    // it computes on the zero rows TMA filled in instead, and stores nothing of them: a second
    // loop in the tile loop costs the main loop registers it does not have to spare.
    if (!Traits::kPersistent && WarpgroupScope{thread}.row0() >= at.rows) {
      pass_keys<Traits>(tile_smem, at, slots, thread);
    } else if constexpr (Traits::kOverlap) {
      attend_overlapped<Traits>(tile_smem, params, maps, at, slots, thread);
    } else {
      attend<Traits>(tile_smem, params, maps, at, slots, thread);
    }
    // its O store read Q's slot
    if (WarpgroupScope{thread}.leader()) mbarrier_arrive(tile_smem.q_empty);
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
    for (int slot = 0; slot < Traits::kQSlots; ++slot) {
      mbarrier_init(smem.for_tile(slot).q_full, 1);  // the producer's arrival (and Q's bytes)
      // Each consumer warpgroup's leader arrives once its O store has read Q's slot.
      mbarrier_init(smem.for_tile(slot).q_empty,
                    Traits::kConsumerThreads / WarpgroupScope::kThreads);
    }
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
