#pragma once
// The TMA backward's per-row statistics (AttentionBackwardParams::row_stats): each query row's
// LSE in base 2 and D = rowsum(dO ∘ O), in blocks of one query block's rows that start on
// 512-byte boundaries: the block's 64 LSEs, then its 64 Ds. The delta kernel writes them; the TMA
// backward's producer brings a query block's statistics into shared memory with one TMA box, on the
// barrier its Q and dO complete on, so the consumers read them there instead of loading them from
// global memory between the step's products and its softmax (where each load's latency stood in the
// way). Rows past a sequence's end in its last block are not written: readers check the row.
// Includes nothing but the platform, so host code can size and map the workspace.
#include "tile/platform.cuh"

namespace flashjit {

/// Rows of a block of statistics: the TMA backward's Br.
inline constexpr int kRowStatRows = 64;
/// Floats of a block: its rows' LSEs in base 2, then their Ds.
inline constexpr int kRowStatFloats = 2 * kRowStatRows;

/// The block of statistics holding row `row` of query head `head` of the sequence whose first
/// query is row `token0` of the batch's and which has `seqlen` rows. Sequence b's blocks start at
/// block (token0 / 64 + b) · heads_q, head after head, ceil(seqlen / 64) blocks a head: from
/// one sequence to the next, token0 / 64 + b grows by at least the sequence's ceil(seqlen / 64),
/// so sequences never share a block.
FJ_HOST_DEVICE index_t row_stats_block(index_t token0, int sequence, int heads_q, int head,
                                       int seqlen, int row) {
  const index_t first = (token0 / kRowStatRows + sequence) * index_t(heads_q);
  return first + index_t(head) * ((seqlen + kRowStatRows - 1) / kRowStatRows) + row / kRowStatRows;
}

/// Blocks the statistics of `sequences` sequences of `total_q` query rows in all take: every
/// index row_stats_block gives is below it.
constexpr index_t row_stats_blocks(index_t total_q, index_t sequences, index_t heads_q) {
  return (total_q / kRowStatRows + sequences) * heads_q;
}

}  // namespace flashjit
