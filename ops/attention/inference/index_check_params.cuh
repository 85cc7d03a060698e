#pragma once
// The device-side index check's arguments and findings, shared by the host (which fills them
// and names what the kernel found) and attention/index_check_kernel.cuh.
#include "attention/parts/forward_params.cuh"

namespace flashjit {

/// What a violation is, in the order the host checks them.
enum class IndexViolation : unsigned {
  none = 0,
  cu_seqlens_q = 1,     // not from 0, decreasing, a sequence too long, or past q's rows
  cu_seqlens_k = 2,     // likewise for k
  seqlens_k = 3,        // a key count outside [0, seqlen_k - appended] (or the packed keys)
  page_table = 4,       // a used page outside [0, num_pages)
  cache_batch_idx = 5,  // a cache row outside [0, cache_rows)
  cache_leftpad = 6,    // a left pad outside [0, the sequence's key count]
  seqused_q = 7,        // a used query count outside [0, the sequence's rows]
  rotary_cos = 8,       // a rotated row's position past the rotary tables
};

struct IndexCheckParams {
  SequenceIndex sequences;
  int batch;
  int seqlen_q;    // the longest sequence's queries
  int seqlen_k;    // the longest sequence's keys
  int total_q;     // rows of packed q
  int total_k;     // rows of packed k
  int num_pages;   // pages of a paged cache
  int appended;    // keys the call appends to each sequence (its cache must hold them too)
  int cache_rows;  // batch rows of a dense cache (cache_batch_idx's range)
  int rotary_positions;         // positions of the rotary tables; 0: no rotary
  bool rotary_queries_advance;  // query i rotates at the cached count + i (its rows count too)
  // (batch << 32 | kind << 24 | position) of the first violation; ~0 when none. Positions
  // above 2^24 - 1 are clamped (the host finds the exact one).
  unsigned long long* first;
};

}  // namespace flashjit
