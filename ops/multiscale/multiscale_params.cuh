#pragma once
// The multi-scale attention (retention) kernels' run-time arguments (host fills, kernels take by
// value). The tensors, sizes and per-row arrays are the attention backward's, so the attention
// tile programs' pipelines and row kernels serve multi-scale attention unchanged; the mask is
// multi-scale attention's.
#include "attention/parts/backward_params.cuh"

namespace flashjit {

/// Which mask M a multi-scale kernel applies (the public MultiScaleMask's device twin).
enum class MultiScaleMaskKind {
  decay,   // M[n, m] = γ_h^(n − m) for n >= m, else 0: generated from one rate per head
  tensor,  // M read from a (heads_q, seqlen_q, seqlen_k) fp32 tensor
};

struct MultiScaleParams {
  // q, k, v, o (written by the forward), dout, dq, dk, dv; sizes and heads_per_kv. `lse` is the
  // backward's r = rowsum(|S|) per query row (as the forward wrote it into `rowsum`), `delta`
  // δ = rowsum(dO ∘ O); `scale` multiplies Q Kᵀ. dq_accum is null; the window fields and
  // score_scale are unused.
  AttentionBackwardParams attention;
  float* rowsum;  // the forward's r per query row (batch, heads_q, seqlen_q), or nullptr
  index_t rowsum_batch_stride;
  index_t rowsum_head_stride;
  const float* mask;  // decay: γ per query head (heads_q); tensor: M (heads_q, seqlen_q, seqlen_k)
  index_t mask_head_stride;
  index_t mask_row_stride;  // the tensor's; its last stride is 1
  float* dmask;             // tensor mask only: dL/dM summed over the batch, or nullptr
  index_t dmask_head_stride;
  index_t dmask_row_stride;
};

}  // namespace flashjit
