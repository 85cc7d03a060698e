#pragma once
// The sm_90a forward's tiles (tma_forward_kernel.cuh). Persistent (Traits::kPersistent), one
// CTA per SM walks tiles of (query block, head, batch), so that a CTA's prologue (barriers,
// setmaxnreg) is paid once and the next tile's first loads run under the previous tile's last
// steps; otherwise each CTA takes one tile, the grid holding them all. The persistent loop
// keeps a few more values live through the main loop, and with the larger tiles ptxas spills
// (112 bytes of spill stores at head dim 128 with Bc 176, NVRTC 13.0), so it is a config of its
// own.
#include "attention/forward_params.cuh"
#include "attention/key_window.cuh"
#include "attention/mask_kind.cuh"

namespace flashjit {

/// Where a CTA works on one tile: its query block, (batch, head), and the key blocks it visits.
struct TmaForwardBlock {
  int row0;  // the block's first query row
  int rows;  // valid query rows in the block
  int head, kv_head, batch;
  BlockRange keys;
};

/// The tiles of a launch, numbered so that tile t is query block query_blocks − 1 − t / (heads ·
/// batch): with a causal mask the last query blocks see the most keys, so the longest tiles go
/// out in the first wave and the short ones fill the gaps after (longest first, as
/// FlashAttention-3 orders causal tiles). CTA c takes tile c and, persistent, c + gridDim.x,
/// c + 2·gridDim.x, …
template <class Traits>
struct TileSchedule {
  int query_blocks;  // ⌈seqlen_q / kBlockM⌉
  int per_row;       // tiles of one query block: heads_q · batch
  int count;         // every tile

  FJ_DEVICE explicit TileSchedule(const AttentionForwardParams& params)
      : query_blocks((params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM),
        per_row(params.heads_q * params.batch),
        count(query_blocks * per_row) {}

  FJ_DEVICE int first() const { return int(blockIdx.x); }
  FJ_DEVICE int next(int tile) const { return Traits::kPersistent ? tile + int(gridDim.x) : count; }
  FJ_DEVICE bool done(int tile) const { return tile >= count; }

  /// Tile `tile`'s rows, head, batch and key blocks.
  FJ_DEVICE TmaForwardBlock block(const AttentionForwardParams& params, int tile) const {
    const int query_block = query_blocks - 1 - tile / per_row, head = tile % per_row % params.heads_q;
    const int row0 = query_block * Traits::kBlockM;
    const int rows = min_int(Traits::kBlockM, params.seqlen_q - row0);
    const KeyWindow<Traits::kMask> window(params);
    return {row0,
            rows,
            head,
            head / params.heads_per_kv,
            tile % per_row / params.heads_q,
            window.key_blocks(row0, row0 + rows - 1, Traits::kBlockN)};
  }

  /// The first tile after `tile` of this CTA's with a key block to visit (done() when none).
  FJ_DEVICE int next_with_keys(const AttentionForwardParams& params, int tile) const {
    for (tile = next(tile); !done(tile); tile = next(tile)) {
      if (!block(params, tile).keys.empty()) break;
    }
    return tile;
  }
};

}  // namespace flashjit
