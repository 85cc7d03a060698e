#pragma once
// The sm_90a forward's tiles (tma_forward_kernel.cuh). Persistent (Traits::kPersistent), one
// CTA per SM walks tiles of (query block, head, batch), so that a CTA's prologue (barriers,
// setmaxnreg) is paid once and the next tile's first loads run under the previous tile's last
// steps; otherwise each CTA takes one tile, the grid holding them all. The persistent loop
// keeps a few more values live through the main loop; with the larger tiles it once spilled (112
// bytes of spill stores at head dim 128 with Bc 176, NVRTC 13.0), which made it a config of its
// own. It compiled spill-free at head dims 128 and 256 on 2026-12-02 (docs/hopper.md) and
// waits for a GPU's timing against one tile a CTA before it is the default there.
#include "attention/hopper/tma_forward_space.cuh"
#include "attention/parts/block_mask_ranges.cuh"
#include "attention/parts/forward_params.cuh"
#include "attention/parts/key_window.cuh"
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/sequence_span.cuh"
#include "tile/memory.cuh"
#include "tile/pipeline_ring.cuh"
#include "tile/semaphore.cuh"

namespace flashjit {

/// Where a CTA works on one tile: its query block, (batch, head), and the key blocks it visits.
struct TmaForwardBlock {
  int row0;  // the block's first query row
  int rows;  // valid query rows in the block; <= 0: none (past a shorter packed sequence)
  int head, kv_head, batch;
  BlockRange keys;
  // Where the rows are in the tensors (TMA coordinates): query row0 is row q_row0 of batch
  // `tensor_batch`, key j row k_row0 + j. Dense, the same as above; packed, the sequence's
  // offsets in batch 0.
  int q_row0, k_row0, tensor_batch;
  int seqlen_q, seqlen_k;  // the sequence's lengths (the params' unless packed)

  /// Row r's query position within the sequence, and its head (what modifiers see).
  FJ_DEVICE int query(int r) const { return row0 + r; }
  FJ_DEVICE int query_head(int) const { return head; }

  /// The mask over the sequence's own lengths.
  template <MaskKind Kind>
  FJ_DEVICE KeyWindow<Kind> window(const AttentionForwardParams& params) const {
    return KeyWindow<Kind>(params, seqlen_q, seqlen_k);
  }
};

/// Tiles taken at run time (TileSchedule::kDynamic) on their way from the consumer thread that
/// takes them to the loader and the consumer threads: a PipelineRing<2> whose full barrier
/// hears the taker and whose empty one the loader and every consumer thread, each after its
/// own read (which orders the read before the slot's next write), over two slots, each its own
/// 16 bytes holding the tile for the consumers and a copy for the loader. (The emulator's race
/// shadow keeps several warps' reads of a byte as a set of warps, each handed off once all its
/// threads arrived, which the loader's warp never does, so the loader reads a copy; and it
/// stamps a warp's latest read per 16 bytes, so the consumers' next read of the other slot
/// would look unordered with the write into this one, were they in the same 16 bytes.)
/// A CTA's first tile is its own (TileSchedule::first()); its n-th, n >= 1, is in slot
/// (n - 1) % 2, and its readers know n from their tile loops, which count tiles for Q's phase
/// anyway, so the ring costs them no register.
struct TileHandOver {
  static constexpr int kBytes = PipelineRing<2>::kBytes + 2 * 16;
  PipelineRing<2> ring;  // 16-byte aligned: its barriers, then the two slots

  /// A reader (`loader`, or a consumer thread): the CTA's n-th tile, once handed over (this
  /// thread is then done with its slot).
  FJ_DEVICE int read(int n, bool loader) const {
    const RingPosition<2> at = position(n);
    ring.wait(at);
    const int tile = load_shared(slot(at.stage), loader ? 1 : 0);
    // A consumer warp's lanes all read before any releases: the emulator's race shadow keeps
    // a warp's latest read and wants each lane's release after it (and a warp costs nothing).
    if (!loader) __syncwarp();
    ring.release(at);
    return tile;
  }

  /// The taker: hands over `take()` as the CTA's n-th tile once its slot is free; returns it.
  template <class Take>
  FJ_DEVICE int hand_over(int n, Take&& take) const {
    const RingPosition<2> at = position(n);
    mbarrier_t* const full = ring.acquire_unannounced(at);
    const int tile = take();  // (as late as the slot allows)
    store_shared(slot(at.stage), 0, tile);
    store_shared(slot(at.stage), 1, tile);
    mbarrier_arrive(full);  // a release: the readers' wait sees the tile
    return tile;
  }

 private:
  // The position of the n-th tile, counted from the ring's first slot use (the tile loops' count
  // stands in for a RingPosition each side would advance).
  FJ_DEVICE static RingPosition<2> position(int n) {
    return {(n - 1) & 1, static_cast<unsigned>((n - 1) >> 1) & 1u};
  }
  FJ_DEVICE int* slot(int stage) const {
    return reinterpret_cast<int*>(ring.barriers + 4) + 4 * stage;
  }
};

/// The tiles of a launch, in sections of `section` (batch, head)s — the heads of one key/value
/// head adjacent — whose K and V together fit in L2 (kL2SectionBytes), a section's tiles
/// numbered query block by query block from the last down, its (batch, head)s fastest. The
/// CTAs running at any moment (a wave: an SM each) then read the K and V of one or two
/// sections, which stay in L2 for all their query blocks, where numbering every head fastest
/// had each wave stream every head's K and V from DRAM again (2.3 GB read for 0.27 GB of data
/// at head dim 128, 2 × 16 heads of 8k, measured by ncu and reproduced by the emulator's L2
/// model: tests/ops/test_memory_model_forward.cpp; 0.20 GB once each head's tiles went
/// together, ncu on an H200, 2026-12-04). With a causal or windowed mask a head's last query
/// blocks see the most keys, so a section's go first and its short ones fill the gaps after,
/// as FlashAttention-3 orders causal tiles inside its L2 sections. Sections of one (batch,
/// head), which unmasked launches take (every tile the same length), leave short sequences'
/// last heads' long tiles to the launch's end: 7 % over the least makespan at 1k and 4k tokens
/// in tests/ops/test_tma_tile_order.cpp's model, under 1 % in sections. Persistent CTAs stride
/// statically, whatever the tiles cost: there the busiest SM has 1.57 times the average work
/// one head at a time (causal, 16k, batch 1, whose default is persistent: 0.70 of cuDNN on an
/// H200, 0.82 with the heads fastest) and 1.16 in sections. So persistent masked launches
/// (kDynamic) take their tiles from a counter instead, FlashAttention-3's dynamic scheduler:
/// after its first, each CTA takes the next untaken tile in this order as its current one
/// starts (hand_over_next), so a CTA that drew short tiles takes more of them (the busiest SM
/// 1.017 times the average in the model at 16k, batch 1). Otherwise CTA c takes tile c and,
/// persistent, c + gridDim.x, c + 2·gridDim.x, … In clusters of kClusterBlocks CTAs
/// (unmasked), the CTAs of a cluster take consecutive query blocks of one (head, batch), and the
/// query blocks are counted up to whole clusters: a CTA past the last one has no row.
template <class Traits>
struct TileSchedule {
  int query_blocks;  // ⌈seqlen_q / kBlockM⌉
  int per_row;       // tiles of one query block: heads_q · batch
  int count;         // every tile
  int section;       // (batch, head)s a section interleaves (1 unmasked)

  FJ_DEVICE explicit TileSchedule(const AttentionForwardParams& params)
      : query_blocks((params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM),
        per_row(params.heads_q * params.batch),
        count(int(tma_forward_tiles(query_blocks, per_row, Traits::kClusterBlocks))),
        section(Traits::kMask == MaskKind::none || Traits::kClusterBlocks > 1
                    ? 1
                    : tma_forward_section(params.seqlen_k, params.heads_per_kv, per_row,
                                          2 * Traits::kHeadDim,
                                          int(sizeof(typename Traits::Element)))) {}

  /// Tiles taken from the launch's counter (AttentionForwardParams::tile_counter) by a
  /// consumer thread and handed over in shared memory (TileHandOver): the persistent masked
  /// launches, as tma_forward_takes_tiles says.
  static constexpr bool kDynamic = tma_forward_takes_tiles(
      Traits::kPersistent, Traits::kMask != MaskKind::none, Traits::kKvE4m3);

  FJ_DEVICE int first() const { return int(blockIdx.x); }
  FJ_DEVICE int next(int tile) const { return Traits::kPersistent ? tile + int(gridDim.x) : count; }
  FJ_DEVICE bool done(int tile) const { return tile >= count; }

  /// The CTA's n-th tile, which follows `tile`, for the loader or a consumer thread: next(), or
  /// with kDynamic the one handed over.
  FJ_DEVICE int after(const TileHandOver& handed, int tile, int n, bool loader) const {
    return kDynamic ? handed.read(n, loader) : next(tile);
  }

  /// kDynamic, by one consumer thread as its CTA's n-th tile starts: hands over the (n+1)-th,
  /// the counter's next. The loader reads it as it issues the n-th tile's last block, when the
  /// consumers have begun the n-th tile (or it waits for them in the hand-over): the take comes
  /// as late as keeps the loads ahead, so a CTA that drew short tiles takes more of them. (A
  /// thread of the producer warpgroup would have done nothing else, but any code of a second
  /// producer thread spilled the loader's 24 registers, 530 bytes; so did a take by the loader,
  /// 192 bytes.)
  FJ_DEVICE void hand_over_next(const AttentionForwardParams& params, const TileHandOver& handed,
                                int n) const {
    handed.hand_over(n + 1, [&] { return take(params); });
  }

  /// Tile `tile`'s rows, head, batch and key blocks. Packed, query_blocks covers the longest
  /// sequence, so a shorter one's later tiles have no row and no key.
  FJ_DEVICE TmaForwardBlock block(const AttentionForwardParams& params, int tile) const {
    constexpr int kCluster = Traits::kClusterBlocks;
    const int clusters = (query_blocks + kCluster - 1) / kCluster;  // of one (head, batch)
    int query_block, place;
    if constexpr (kCluster > 1) {
      query_block = tile / kCluster % clusters * kCluster + tile % kCluster;
      place = tile / kCluster / clusters;
    } else {
      const TmaTileSlot slot = tma_forward_tile_slot(tile, query_blocks, per_row, section);
      query_block = slot.query_block;
      place = slot.place;
    }
    const int head = place % params.heads_q, batch = place / params.heads_q;
    const int row0 = query_block * Traits::kBlockM;
    int seqlen_q = params.seqlen_q, seqlen_k = params.seqlen_k;
    int q_start = 0, k_start = 0, tensor_batch = batch;
    if constexpr (Traits::kVarlen) {
      const SequenceSpan queries = sequence_span(params.sequences.cu_seqlens_q, batch);
      const SequenceSpan keys = sequence_span(params.sequences.cu_seqlens_k, batch);
      q_start = int(queries.start);
      k_start = int(keys.start);
      // seqused_q: the sequence's used queries (Q's TMA box may bring in rows past them, but
      // a row's scores are its own, and O and LSE are stored up to `rows` only).
      seqlen_q = params.sequences.seqused_q != nullptr
                     ? load_global_index(params.sequences.seqused_q, batch)
                     : queries.length;
      seqlen_k = params.sequences.seqlens_k != nullptr
                     ? load_global_index(params.sequences.seqlens_k, batch)
                     : keys.length;
      tensor_batch = 0;
    }
    const int rows = min_int(Traits::kBlockM, seqlen_q - row0);
    const KeyWindow<Traits::kMask> window(params, seqlen_q, seqlen_k);
    // A CTA with no row visits no key, unless its cluster's peers do: unmasked, every row sees
    // the same keys, and it walks them in step with them.
    BlockRange keys = rows > 0 || kCluster > 1
                          ? window.key_blocks(row0, row0 + max_int(rows, 1) - 1, Traits::kBlockN)
                          : BlockRange{0, 0};
    // A block mask (of a mask modifier) cuts them to the keys its rows may see; one CTA a tile
    // only (the persistent loop has no registers for it, a cluster's CTAs walk the same keys).
    if constexpr (Traits::Modifiers::kMask && !Traits::kPersistent && kCluster == 1) {
      if (rows > 0) {
        keys = masked_keys(params.block_mask, batch, head, row0, rows, seqlen_k)
                   .key_blocks<Traits::kBlockN>(keys);
      }
    }
    return {row0,         rows,     head,           head / params.heads_per_kv,
            batch,        keys,     q_start + row0, k_start,
            tensor_batch, seqlen_q, seqlen_k};
  }

 private:
  /// The counter's next tile, past the first gridDim.x (each CTA's first()). Each CTA takes
  /// until it gets one past the last, so a launch takes count times (gridDim.x <= count) and
  /// the take that gets count - 1 is its last: it sets the counter back to 0 for the next
  /// launch, so no launch needs it zeroed first (and a CUDA graph captures the call).
  FJ_DEVICE int take(const AttentionForwardParams& params) const {
    const int taken = semaphore_arrive_add(params.tile_counter, 1);
    if (taken == count - 1) store_global_raw(params.tile_counter, 0);
    return int(gridDim.x) + taken;
  }
};

}  // namespace flashjit
