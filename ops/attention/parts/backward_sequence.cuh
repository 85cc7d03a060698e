#pragma once
// The backward of a variable-length batch reuses the dense kernels whole: each CTA first
// rebases the params to its own sequence, as a dense batch of one. Tensors start at the
// sequence's first row, the lengths are its own, and the workspace rows (D, dQ's fp32 sum) are
// the heads_q · seqlen_q rows after those of the sequences before it; the deterministic TMA
// backward's turn counters, those of the longest sequence's query blocks per sequence. Then
// batch is 0.
#include "attention/parts/backward_params.cuh"
#include "attention/parts/sequence_span.cuh"

namespace flashjit {

/// The row of sequence `batch`'s first query in the batch's rows (D's and dQ's workspace rows
/// count from it): packed queries, cu_seqlens_q's start; dense, batch · seqlen_q.
FJ_DEVICE index_t first_query_token(const AttentionBackwardParams& p, int batch) {
  const int* cu_seqlens_q = p.sequences.cu_seqlens_q;
  return cu_seqlens_q != nullptr ? sequence_span(cu_seqlens_q, batch).start
                                 : index_t(batch) * p.seqlen_q;
}

/// Rebases `p` to sequence `batch` of the variable-length batch its SequenceIndex describes
/// (cu_seqlens_q and cu_seqlens_k, each optional: a dense side keeps seqlen and batch stride;
/// seqused_q and seqlens_k, each optional, the counts used of each sequence's rows).
template <typename T>
FJ_DEVICE void rebase_to_sequence(AttentionBackwardParams& p, int batch) {
  const SequenceIndex& s = p.sequences;
  if (p.dq_semaphore != nullptr) {  // (batch, heads_q, blocks of the longest), before seqlen_q
    p.dq_semaphore += index_t(batch) * p.heads_q * ceil_div(p.seqlen_q, kDqSemaphoreRows);
  }
  const index_t token0 = first_query_token(p, batch);
  index_t q_start = 0, k_start = 0;
  if (s.cu_seqlens_q != nullptr) {
    const SequenceSpan queries = sequence_span(s.cu_seqlens_q, batch);
    q_start = queries.start;
    p.seqlen_q = queries.length;
  }
  if (s.cu_seqlens_k != nullptr) {
    const SequenceSpan keys = sequence_span(s.cu_seqlens_k, batch);
    k_start = keys.start;
    p.seqlen_k = keys.length;
  }
  // The used ones (seqused_q, seqlens_k): the sequence is those alone; the rows past them are
  // not read, and their gradients are zeroed by the host's fill (attention/unused_rows_kernel).
  if (s.seqused_q != nullptr) p.seqlen_q = load_global_index(s.seqused_q, batch);
  if (s.seqlens_k != nullptr) p.seqlen_k = load_global_index(s.seqlens_k, batch);
  const auto rebase = [&](HeadTensor& t, index_t start) {
    t.data = static_cast<T*>(t.data) + batch * t.batch_stride + start * t.row_stride;
  };
  rebase(p.q, q_start);
  rebase(p.o, q_start);
  rebase(p.dout, q_start);
  rebase(p.dq, q_start);
  rebase(p.k, k_start);
  rebase(p.v, k_start);
  rebase(p.dk, k_start);
  rebase(p.dv, k_start);
  p.lse += batch * p.lse_batch_stride + q_start;
  const index_t workspace_row0 = token0 * p.heads_q;  // (heads_q, seqlen_q) rows per sequence
  p.delta += workspace_row0;
  if (p.dq_accum != nullptr) p.dq_accum += workspace_row0 * p.head_dim;
}

}  // namespace flashjit
