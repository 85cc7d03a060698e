#pragma once
// Backward, last step of the default (atomic) mode: dQ = scale · the fp32 sum the dK/dV kernel
// accumulated, rounded to the element type. One warp per row.
#include "attention/backward_params.cuh"
#include "attention/backward_space.cuh"
#include "tile/memory.cuh"
#include "tile/warp.cuh"

namespace flashjit {

constexpr int kConvertWarps = attention_backward_space::kDeltaRowsPerBlock;  // one per row

/// Grid (ceil(seqlen_q / kConvertWarps), heads_q, batch), block kConvertWarps · 32 threads.
template <typename T>
FJ_GLOBAL void __launch_bounds__(kConvertWarps * 32)
    attention_backward_dq_convert_kernel(AttentionBackwardParams params) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = int(blockIdx.x) * kConvertWarps + int(threadIdx.x) / kWarpSize;
  if (row >= params.seqlen_q) return;
  const int head = blockIdx.y, batch = blockIdx.z;
  const index_t index = (index_t(batch) * params.heads_q + head) * params.seqlen_q + row;
  const float* accum = params.dq_accum + index * params.head_dim;  // (head_dim,)
  T* dq = params.dq.rows<T>(batch, head, row);                     // (head_dim,)
  for (int d = lane; d < params.head_dim; d += kWarpSize) {
    store_global(dq, d, params.scale * load_global(accum, d));
  }
}

}  // namespace flashjit
