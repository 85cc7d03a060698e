#pragma once
// Backward preprocessing: D = rowsum(dO ∘ O) per query row, the term the softmax's Jacobian
// subtracts (dS = P ∘ (dP − D)), and the zeroing of the row's dQ workspace when dQ is summed
// (and of its query block's turn counter in the ordered sums of the deterministic TMA backward).
// One warp per row.
#include "attention/fa2/query_row.cuh"
#include "tile/memory.cuh"

namespace flashjit {

/// Grid (ceil(seqlen_q / kRowWarps), heads_q, batch), block kRowWarps · 32 threads.
template <typename T, bool Varlen = false>
FJ_GLOBAL void __launch_bounds__(kRowWarps * 32)
    attention_backward_delta_kernel(AttentionBackwardParams params) {
  if constexpr (Varlen) rebase_to_sequence<T>(params, blockIdx.z);  // its own sequence
  const QueryRow q = this_query_row(params, Varlen ? 0 : int(blockIdx.z));
  if (!q.valid(params)) return;
  const T* o = params.o.rows<const T>(q.batch, q.head, q.row);        // (head_dim_v,)
  const T* dout = params.dout.rows<const T>(q.batch, q.head, q.row);  // (head_dim_v,)
  float sum = 0.0f;
  for (int d = q.lane; d < params.head_dim_v; d += kWarpSize) {
    sum += load_global(o, d) * load_global(dout, d);
  }
  sum = warp_allreduce(sum, [](float a, float b) { return a + b; });
  if (q.lane == 0) store_global(params.delta, q.index, sum);
  if (params.dq_accum != nullptr) {
    float* accum = params.dq_accum + q.index * params.head_dim;  // (head_dim,)
    for (int d = q.lane; d < params.head_dim; d += kWarpSize) store_global(accum, d, 0.0f);
  }
  if (params.dq_semaphore != nullptr && q.lane == 0 && q.row % kDqSemaphoreRows == 0) {
    store_global_raw(dq_turn_counter(params, q.index / params.seqlen_q, q.row), 0);
  }
}

}  // namespace flashjit
