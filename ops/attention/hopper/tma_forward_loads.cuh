#pragma once
// The producer's loads of the warp-specialized Hopper forward (tma_forward_kernel.cuh): K and V
// blocks into their rings. A 16-bit cache's blocks go straight from TMA into a ring slot, issued
// by one thread. An fp8 (e4m3) cache's go through the producer warpgroup (ProducerLoads): TMA
// brings a block's bytes into one of two staging slots, and the warpgroup's 128 threads convert
// them into the block's ring slot in the 16-bit type and swizzle the products read, then
// announce it. The next block's bytes are on their way while one block is converted, and the
// consumers never see fp8: their loops are the 16-bit ones. (FlashAttention-3's fp8 kernel
// uses its producer warps alike, to transpose V; here wgmma's fp8 form would need Q in fp8 too.)
#include "attention/hopper/tma_forward_traits.cuh"
#include "attention/hopper/tma_tile_schedule.cuh"
#include "tile/warpgroup_scope.cuh"

namespace flashjit {

/// Producer: block `block`'s rows of K or V (`map`) into the next free slot of `ring`, whose
/// slot 0 is `slot0`; in a cluster, this CTA's share of them (ClusterShare) into that slot of
/// every CTA. Kept in L2 over other lines (evict_last): the (batch, head)'s next query tiles,
/// running beside this one in the tile order, read the same blocks.
template <class Traits>
FJ_DEVICE void load_key_block(const typename Traits::Ring& ring,
                              RingPosition<Traits::kStages>& slot,
                              const typename Traits::KVTile& slot0, const tma_descriptor& map,
                              const TmaForwardBlock& at, int block) {
  using KVTile = typename Traits::KVTile;
  mbarrier_t* full = ring.acquire(slot, KVTile::kBytes);  // an empty slot (in every CTA)
  int origin[4] = {0, at.k_row0 + block * Traits::kBlockN, at.kv_head, at.tensor_batch};
  const KVTile tile{slot0.data + slot.stage * KVTile::kBytes / 2};
  if constexpr (Traits::kClusterBlocks > 1) {
    const ClusterShare<Traits::kClusterBlocks, Traits::kBlockN> share(cluster_ctarank());
    origin[1] += share.first_row;
    tma_load_share_multicast<Traits::kClusterBlocks, L2Evict::last>(share.at(tile), map, origin,
                                                                    full);
  } else {
    tma_load_tile<L2Evict::last>(tile, map, origin, full);
  }
  slot.advance();
}

/// Producer, packed sequences: V's block `block` if its box reaches past the last sequence's
/// keys (cu_seqlens_k's last offset), into the next free slot; false, with nothing loaded, if
/// it does not. The block lands on v_tail (one tile a CTA: its first phase), the lines past
/// the keys are zeroed (as TMA's fill past a tensor's end would be), and only then is the slot
/// announced full to the consumers.
template <class Traits>
FJ_DEVICE bool load_values_past_end(const TmaForwardShared<Traits>& smem,
                                    const AttentionForwardParams& params,
                                    RingPosition<Traits::kStages>& slot, const tma_descriptor& map,
                                    const TmaForwardBlock& at, int block) {
  static_assert(Traits::kVarlen && !Traits::kPersistent && Traits::kClusterBlocks == 1,
                "packed sequences: one CTA per tile, no cluster");
  using KVTile = typename Traits::KVTile;
  const int keys_end = load_global_index(params.sequences.cu_seqlens_k, params.batch);
  const int row0 = at.k_row0 + block * Traits::kBlockN;
  if (row0 + Traits::kBlockN <= keys_end) return false;
  mbarrier_t* full = smem.v_ring.acquire_unannounced(slot);
  const KVTile tile = smem.v(slot.stage);
  const int origin[4] = {0, row0, at.kv_head, at.tensor_batch};
  mbarrier_arrive_expect_tx(smem.v_tail, KVTile::kBytes);
  tma_load_tile(tile, map, origin, smem.v_tail);
  mbarrier_wait_parity(smem.v_tail, 0);
  clear_lines(tile, keys_end - row0, 0, 1);
  fence_proxy_async();  // generic writes, read by the consumers' wgmma
  mbarrier_arrive(full);
  slot.advance();
  return true;
}

/// The producer's loads of one CTA's K and V blocks, in the order load_tiles issues them.
/// 16-bit (Traits::kKvE4m3 false): one thread, the producer warpgroup's first, runs the loads
/// and each block goes straight into its slot. fp8: the whole warpgroup runs them. Its first
/// thread issues each block's TMA into the next free staging slot; then every thread converts
/// its chunks of the block staged before (the next block's bytes are in flight meanwhile),
/// fences, and arrives on that block's ring slot, full once all 128 have, and on its staging
/// slot, free again once all 128 have. The barriers order each thread's own writes, so no
/// thread waits for the others.
template <class Traits>
struct ProducerLoads {
  using KVTile = typename Traits::KVTile;
  using Ring = typename Traits::Ring;

  /// A staged block waiting to be converted into its slot.
  struct Staged {
    Ring ring;
    RingPosition<Traits::kStages> slot;
    KVTile tile;  // the slot's 16-bit tile
  };

  const TmaForwardShared<Traits>& smem;
  int worker;                  // this thread in the producer warpgroup, 0 to 127
  RingPosition<2> staging;     // fp8: the staging slot the next block goes to
  RingPosition<2> converting;  // fp8: the staging slot of the block waiting
  bool pending = false;        // fp8: `waiting` holds a block
  Staged waiting{};            // fp8: the block staged last

  FJ_DEVICE ProducerLoads(const TmaForwardShared<Traits>& smem_, int thread)
      : smem(smem_), worker(thread - Traits::kConsumerThreads) {}

  /// Whether this thread issues the TMA loads and the barriers' single arrivals.
  FJ_DEVICE bool leader() const { return worker == 0; }

  /// Block `block` of K or V (`map`) into the next free slot of `ring` (slot 0 `slot0`).
  FJ_DEVICE void key_block(const Ring& ring, RingPosition<Traits::kStages>& slot,
                           const KVTile& slot0, const tma_descriptor& map,
                           const TmaForwardBlock& at, int block) {
    if constexpr (Traits::kKvE4m3) {
      stage(ring, slot, slot0, map, at, block);
    } else {
      load_key_block<Traits>(ring, slot, slot0, map, at, block);
    }
  }

  /// The tile's last V block: as key_block, with packed 16-bit sequences zeroing the lines its
  /// box reads past the last sequence's keys (an fp8 cache's bytes are all finite values:
  /// convert_e4m3_tile).
  FJ_DEVICE void last_values(const AttentionForwardParams& params,
                             RingPosition<Traits::kStages>& slot, const tma_descriptor& map,
                             const TmaForwardBlock& at, int block) {
    if constexpr (Traits::kVarlen && !Traits::kKvE4m3) {
      if (load_values_past_end<Traits>(smem, params, slot, map, at, block)) return;
    }
    key_block(smem.v_ring, slot, smem.v0, map, at, block);
  }

  /// fp8: this thread's share of the block staged last, converted into its slot and announced.
  /// Before anything that waits on the consumers, who may be waiting for that block.
  FJ_DEVICE void flush() {
    if constexpr (Traits::kKvE4m3) {
      if (!pending) return;
      hand_over_staged(smem.staging_ring, converting, waiting.ring, waiting.slot, [&] {
        convert_e4m3_tile<WarpgroupScope::kThreads>(smem.staging(converting.stage), waiting.tile,
                                                    worker);
      });
      pending = false;
    }
  }

 private:
  /// fp8: starts block `block`'s bytes into the next staging slot once it is free, converts the
  /// block staged before it (flush), and keeps this one waiting.
  FJ_DEVICE void stage(const Ring& ring, RingPosition<Traits::kStages>& slot, const KVTile& slot0,
                       const tma_descriptor& map, const TmaForwardBlock& at, int block) {
    if (leader()) {
      mbarrier_t* full = smem.staging_ring.acquire(staging, Traits::StagingTile::kBytes);
      const int origin[4] = {0, at.k_row0 + block * Traits::kBlockN, at.kv_head, at.tensor_batch};
      tma_load(smem.staging(staging.stage).data, map, origin, full);
    }
    staging.advance();
    flush();
    waiting = {ring, slot, KVTile{slot0.data + slot.stage * KVTile::kBytes / 2}};
    pending = true;
    slot.advance();
  }
};

}  // namespace flashjit
