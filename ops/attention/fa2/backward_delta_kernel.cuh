#pragma once
// Backward preprocessing: D = rowsum(dO ∘ O) per query row, the term the softmax's Jacobian
// subtracts (dS = P ∘ (dP − D)), for the TMA backward beside the row's LSE in base 2
// (attention/parts/row_stats.cuh), and the zeroing of the row's dQ workspace when dQ is summed
// (and of its query block's turn counter in the ordered sums of the deterministic TMA backward).
// One warp per row.
#include "attention/fa2/query_row.cuh"
#include "attention/parts/backward_scores.cuh"
#include "attention/parts/row_stats.cuh"
#include "tile/memory.cuh"

namespace flashjit {

/// Grid (ceil(seqlen_q / kRowWarps), heads_q, batch), block kRowWarps · 32 threads.
template <typename T, bool Varlen = false>
FJ_GLOBAL void __launch_bounds__(kRowWarps * 32)
    attention_backward_delta_kernel(AttentionBackwardParams params) {
  const index_t token0 = first_query_token(params, blockIdx.z);     // before any rebase
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
  if (q.lane == 0) {
    if (params.row_stats != nullptr) {  // the TMA backward's: D beside the row's LSE
      const index_t block =
          row_stats_block(token0, blockIdx.z, params.heads_q, q.head, params.seqlen_q, q.row);
      float* stats = params.row_stats + block * kRowStatFloats + q.row % kRowStatRows;
      store_global(stats, 0, lse_base2(load_global(lse_rows(params, q.batch, q.head, q.row), 0)));
      store_global(stats, kRowStatRows, sum);
    } else {
      store_global(params.delta, q.index, sum);
    }
  }
  if (params.dq_accum != nullptr) {
    float* accum = params.dq_accum + q.index * params.head_dim;  // (head_dim,)
    for (int d = q.lane; d < params.head_dim; d += kWarpSize) store_global(accum, d, 0.0f);
  }
  if (params.dq_semaphore != nullptr && q.lane == 0 && q.row % kDqSemaphoreRows == 0) {
    store_global_raw(dq_turn_counter(params, q.index / params.seqlen_q, q.row), 0);
  }
}

}  // namespace flashjit
