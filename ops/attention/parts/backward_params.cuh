#pragma once
// The backward kernels' run-time arguments (host fills, kernels take by value). The mask and
// score fields mean what they mean in AttentionForwardParams.
#include "attention/parts/forward_params.cuh"

namespace flashjit {

/// Query rows per turn counter of AttentionBackwardParams::dq_semaphore: the TMA backward's Br.
inline constexpr int kDqSemaphoreRows = 64;

struct AttentionBackwardParams {
  static constexpr int kNoWindow = AttentionForwardParams::kNoWindow;

  HeadTensor q, k, v;  // inputs of the forward pass
  HeadTensor o;        // its output
  HeadTensor dout;     // dL/dO, like o
  HeadTensor dq;       // written, like q
  HeadTensor dk, dv;   // written, like k and v (summed over the query heads sharing them)
  const float* lse;    // (batch, heads_q, seqlen_q) from the forward pass, natural log
  index_t lse_batch_stride;
  index_t lse_head_stride;
  float* delta;  // (batch, heads_q, seqlen_q) contiguous: D = rowsum(dO ∘ O), workspace
  // The TMA backward's instead of delta: each row's LSE in base 2 and D side by side, in blocks
  // of 64 rows one TMA box each (attention/parts/row_stats.cuh); nullptr for the other kernels.
  float* row_stats;
  // (batch, heads_q, seqlen_q, head_dim) contiguous fp32: dQ / scale summed atomically by the
  // dK/dV kernel, then rounded into dq; nullptr in the mma.sync deterministic mode (a dQ
  // kernel of its own)
  float* dq_accum;
  // The TMA backward's deterministic mode: (batch, heads_q, ceil(seqlen_q / kDqSemaphoreRows))
  // contiguous, one turn counter per query block, the dQ sums into it so far (the delta kernel
  // zeroes them); nullptr otherwise.
  int* dq_semaphore;

  int batch;
  int heads_q;
  int seqlen_q;
  int seqlen_k;
  int head_dim;    // Q's, K's, dQ's and dK's
  int head_dim_v;  // V's, O's, dO's and dV's: at most head_dim (as in the forward)
  int heads_per_kv;
  int window_left;
  int window_right;

  float score_scale;   // as in the forward pass
  float softcap_log2;  // as in the forward pass
  float scale;         // the softmax scale: dQ = scale · dS K, dK = scale · dSᵀ Q

  // A variable-length batch: cu_seqlens_q and cu_seqlens_k (packed tensors, batch stride 0;
  // LSE (heads_q, total_q)), read by the Varlen specializations only; zero otherwise.
  SequenceIndex sequences;

  CaptureTable captures;  // tensors the modifiers read (Attention::captures)
  // A dense batch's block mask (Attention::block_mask; ranges nullptr: none): the dK/dV kernels
  // visit only the query blocks that may see their keys, the dQ kernel only the key blocks its
  // rows may see.
  BlockMaskView block_mask;
  DropoutParams dropout;  // the forward's, read by the kernels whose Modifiers have kDropout
};

/// The turn counter in p.dq_semaphore of the query block holding `row` of query head
/// `batch_head` (batch · heads_q + head).
FJ_DEVICE int* dq_turn_counter(const AttentionBackwardParams& p, index_t batch_head, int row) {
  return p.dq_semaphore + batch_head * ceil_div(p.seqlen_q, kDqSemaphoreRows) +
         row / kDqSemaphoreRows;
}

}  // namespace flashjit
