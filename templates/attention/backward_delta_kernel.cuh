#pragma once
// Backward preprocessing: D = rowsum(dO ∘ O) per query row, the term the softmax's Jacobian
// subtracts (dS = P ∘ (dP − D)), and the zeroing of the row's dQ workspace when dQ is summed
// atomically. One warp per row.
#include "attention/backward_params.cuh"
#include "attention/backward_space.cuh"
#include "tile/memory.cuh"
#include "tile/warp.cuh"

namespace flashjit {

constexpr int kDeltaWarps = attention_backward_space::kDeltaRowsPerBlock;  // one per row

/// Grid (ceil(seqlen_q / kDeltaWarps), heads_q, batch), block kDeltaWarps · 32 threads.
template <typename T>
FJ_GLOBAL void __launch_bounds__(kDeltaWarps * 32)
    attention_backward_delta_kernel(AttentionBackwardParams params) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = int(blockIdx.x) * kDeltaWarps + int(threadIdx.x) / kWarpSize;
  if (row >= params.seqlen_q) return;  // whole warps leave: no barrier follows
  const int head = blockIdx.y, batch = blockIdx.z;
  const T* o = params.o.rows<const T>(batch, head, row);        // (head_dim,)
  const T* dout = params.dout.rows<const T>(batch, head, row);  // (head_dim,)
  float sum = 0.0f;
  for (int d = lane; d < params.head_dim; d += kWarpSize) {
    sum += load_global(o, d) * load_global(dout, d);
  }
  sum = warp_allreduce(sum, [](float a, float b) { return a + b; });
  const index_t index = (index_t(batch) * params.heads_q + head) * params.seqlen_q + row;
  if (lane == 0) store_global(params.delta, index, sum);
  if (params.dq_accum != nullptr) {
    float* accum = params.dq_accum + index * params.head_dim;  // (head_dim,)
    for (int d = lane; d < params.head_dim; d += kWarpSize) store_global(accum, d, 0.0f);
  }
}

}  // namespace flashjit
