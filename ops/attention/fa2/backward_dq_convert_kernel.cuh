#pragma once
// Backward, last step of the default (atomic) mode: dQ = scale · the fp32 sum the dK/dV kernel
// accumulated, rounded to the element type. One warp per row.
#include "attention/fa2/query_row.cuh"
#include "attention/parts/dq_accum_layout.cuh"
#include "tile/memory.cuh"

namespace flashjit {

/// Grid (ceil(seqlen_q / kRowWarps), heads_q, batch), block kRowWarps · 32 threads. Permuted:
/// the sums are in the Hopper backward's layout (dq_accum_layout.cuh), else in plain rows.
template <typename T, bool Varlen = false, bool Permuted = false>
FJ_GLOBAL void __launch_bounds__(kRowWarps * 32)
    attention_backward_dq_convert_kernel(AttentionBackwardParams params) {
  if constexpr (Varlen) rebase_to_sequence<T>(params, blockIdx.z);  // its own sequence
  const QueryRow q = this_query_row(params, Varlen ? 0 : int(blockIdx.z));
  if (!q.valid(params)) return;
  const float* accum = params.dq_accum + q.index * params.head_dim;  // (head_dim,)
  T* dq = params.dq.rows<T>(q.batch, q.head, q.row);                 // (head_dim,)
  const int column_xor = Permuted ? dq_accum_column_xor(params.head_dim, q.index) : 0;
  for (int d = q.lane; d < params.head_dim; d += kWarpSize) {
    store_global(dq, d, params.scale * load_global(accum, d ^ column_xor));
  }
}

}  // namespace flashjit
