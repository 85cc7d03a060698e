#pragma once
// The backward's per-row kernels (D before the main kernels, dQ's rounding after): one warp per
// query row, a block of kRowWarps rows, grid (ceil(seqlen_q / kRowWarps), heads_q, batch);
// for a variable-length batch seqlen_q is the longest sequence's, and each CTA first rebases
// the params to its own (Varlen).
#include "attention/fa2/backward_space.cuh"
#include "attention/parts/backward_params.cuh"
#include "attention/parts/backward_sequence.cuh"
#include "tile/warp.cuh"

namespace flashjit {

constexpr int kRowWarps = attention_backward_space::kDeltaRowsPerBlock;  // one per row

/// The query row this warp owns.
struct QueryRow {
  int lane;
  int row;
  int head;
  int batch;
  index_t index;  // in a contiguous (batch, heads_q, seqlen_q) array: D, or dQ's sum by rows

  /// False for the warps past the last row; they must leave (no barrier follows).
  FJ_DEVICE bool valid(const AttentionBackwardParams& p) const { return row < p.seqlen_q; }
};

/// The query row of this warp in sequence `batch` (blockIdx.z, or 0 for params rebased to
/// one sequence: attention/parts/backward_sequence.cuh).
FJ_DEVICE QueryRow this_query_row(const AttentionBackwardParams& p, int batch) {
  const int row = int(blockIdx.x) * kRowWarps + int(threadIdx.x) / kWarpSize;
  const int head = blockIdx.y;
  return {int(threadIdx.x) % kWarpSize, row, head, batch,
          (index_t(batch) * p.heads_q + head) * p.seqlen_q + row};
}

}  // namespace flashjit
