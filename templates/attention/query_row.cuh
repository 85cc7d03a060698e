#pragma once
// The backward's per-row kernels (D before the main kernels, dQ's rounding after): one warp per
// query row, a block of kRowWarps rows, grid (ceil(seqlen_q / kRowWarps), heads_q, batch).
#include "attention/backward_params.cuh"
#include "attention/backward_space.cuh"
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

FJ_DEVICE QueryRow this_query_row(const AttentionBackwardParams& p) {
  const int row = int(blockIdx.x) * kRowWarps + int(threadIdx.x) / kWarpSize;
  const int head = blockIdx.y, batch = blockIdx.z;
  return {int(threadIdx.x) % kWarpSize, row, head, batch,
          (index_t(batch) * p.heads_q + head) * p.seqlen_q + row};
}

}  // namespace flashjit
