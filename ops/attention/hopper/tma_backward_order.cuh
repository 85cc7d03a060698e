#pragma once
// The order of the Hopper backward's work (tma_backward_kernel.cuh): which key block each CTA
// takes, and in the deterministic mode the turn each key block's dQ sum into a query block
// waits for. Plain arithmetic: the host's model of the schedule uses the same functions.
//
// The deterministic mode's sums into a query block come from the last key block that sees it
// down to the first (FlashAttention-3's order): with a causal mask a key block's first query
// block is the one on its diagonal, where its turn is the first, and each later step's turn
// follows the same step of the block after it, which is never behind. Ascending turns would
// make key block j wait at its first step for every block before it to reach the diagonal:
// a wave that adds a step a key block, about half the atomic mode's whole time again. The CTAs
// take their key blocks last first, so a turn waits only for CTAs the GPU started before it
// (a launch larger than the GPU cannot hang).
#include "attention/parts/key_window.cuh"

namespace flashjit {

/// The key block CTA `cta` (blockIdx.x) of a grid of `grid_blocks` takes: the grid's order in
/// the atomic mode (the causal mask's longest first), the reverse in the deterministic one. A
/// shorter packed sequence's first CTAs there get blocks past its keys: none. (Special
/// registers only, so the consumers recompute the key block rather than hold it: at head dim
/// 128 a key block derived from a loaded length cost them 8 to 16 bytes of spill.)
FJ_DEVICE constexpr int tma_backward_key_block(int cta, int grid_blocks, bool deterministic) {
  return deterministic ? grid_blocks - 1 - cta : cta;
}

/// The turn of key block `key_block`'s dQ sum into the query block whose last row is `last_row`
/// (the number of sums before it): the key blocks of `block_n` keys after this one that see
/// the block. The last of them holds the last key the block's last row sees (hi grows with the
/// row, and the rows see one interval of key blocks: attention/parts/key_window.cuh).
template <MaskKind Kind>
FJ_DEVICE int tma_backward_dq_turn(const KeyWindow<Kind>& window, int key_block, int last_row,
                                   int block_n) {
  return (window.hi(last_row) - 1) / block_n - key_block;
}

}  // namespace flashjit
