#pragma once
// The device-side pass over an inference call's index arrays (RuntimeOptions::check_indices on
// a GPU): one thread per sequence checks its offsets, its key count, its cache row (with an
// append, not an earlier sequence's) and the pages it uses, and the first violation, ordered
// by sequence, then kind, then position, is kept with one atomic minimum. The host then names
// it (attention/inference/attention_inference.cpp) without copying the arrays unless there is
// something to name.
#include "attention/inference/index_check_params.cuh"
#include "attention/parts/sequence_span.cuh"

namespace flashjit {

/// Whether offsets cu[b], cu[b + 1] of a cu_seqlens array are valid for sequence b.
FJ_DEVICE bool offsets_valid(const int* cu, int b, int batch, int longest, int rows) {
  const SequenceSpan span = sequence_span(cu, b);
  const index_t end = span.start + span.length;
  return (b != 0 || span.start == 0) && span.length >= 0 && span.length <= longest &&
         (b + 1 != batch || end <= rows);
}

FJ_DEVICE void report_violation(const IndexCheckParams& p, int b, IndexViolation kind,
                                int position) {
  const unsigned clamped = position < (1 << 24) ? unsigned(position) : (1u << 24) - 1;
  atomic_min_global(p.first, (static_cast<unsigned long long>(b) << 32) |
                                 (static_cast<unsigned long long>(kind) << 24) | clamped);
}

/// Grid ceil(batch / 128), block 128 threads.
FJ_GLOBAL void __launch_bounds__(128) attention_index_check_kernel(IndexCheckParams p) {
  const int b = int(blockIdx.x) * 128 + int(threadIdx.x);
  if (b >= p.batch) return;
  const SequenceIndex& s = p.sequences;
  if (s.cu_seqlens_q != nullptr &&
      !offsets_valid(s.cu_seqlens_q, b, p.batch, p.seqlen_q, p.total_q)) {
    report_violation(p, b, IndexViolation::cu_seqlens_q, b);
    return;
  }
  if (s.seqused_q != nullptr) {
    const int used = load_global_index(s.seqused_q, b);
    const int rows =
        s.cu_seqlens_q != nullptr ? sequence_span(s.cu_seqlens_q, b).length : p.seqlen_q;
    if (used < 0 || used > rows) {
      report_violation(p, b, IndexViolation::seqused_q, b);
      return;
    }
  }
  int keys = p.seqlen_k;  // the most this sequence may have
  if (s.cu_seqlens_k != nullptr) {
    if (!offsets_valid(s.cu_seqlens_k, b, p.batch, p.seqlen_k, p.total_k)) {
      report_violation(p, b, IndexViolation::cu_seqlens_k, b);
      return;
    }
    keys = sequence_span(s.cu_seqlens_k, b).length;
  }
  if (s.seqlens_k != nullptr) {
    const int count = load_global_index(s.seqlens_k, b);
    if (count < 0 || count > keys - p.appended) {
      report_violation(p, b, IndexViolation::seqlens_k, b);
      return;
    }
    if (s.leftpad_k != nullptr) {
      const int pad = load_global_index(s.leftpad_k, b);
      if (pad < 0 || pad > count) {
        report_violation(p, b, IndexViolation::cache_leftpad, b);
        return;
      }
    }
    if (p.rotary_positions > 0) {  // the rows rotated past the cached count fit the tables
      const int queries = !p.rotary_queries_advance ? 0
                          : s.cu_seqlens_q != nullptr ? sequence_span(s.cu_seqlens_q, b).length
                                                      : p.seqlen_q;
      if (count + max_int(p.appended, queries) > p.rotary_positions) {
        report_violation(p, b, IndexViolation::rotary_cos, b);
        return;
      }
    }
    keys = count + p.appended;
  }
  int row = b;  // the sequence's row of a dense cache or of the page table
  if (s.kv_batch_idx != nullptr) {
    row = load_global_index(s.kv_batch_idx, b);
    if (row < 0 || row >= p.cache_rows) {
      report_violation(p, b, IndexViolation::cache_batch_idx, b);
      return;
    }
    // Appending sequences write their rows: a row an earlier sequence has is a violation.
    for (int earlier = 0; p.appended > 0 && earlier < b; ++earlier) {
      if (load_global_index(s.kv_batch_idx, earlier) == row) {
        report_violation(p, b, IndexViolation::cache_batch_idx, b);
        return;
      }
    }
  }
  if (s.page_table == nullptr) return;
  const int used = (keys + s.page_size - 1) / s.page_size;
  for (int page = 0; page < used; ++page) {
    const int entry = load_global_index(s.page_table, index_t(row) * s.page_table_stride + page);
    if (entry < 0 || entry >= p.num_pages) {
      report_violation(p, b, IndexViolation::page_table, page);
      return;
    }
  }
}

}  // namespace flashjit
