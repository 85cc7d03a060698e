#pragma once
// The one mask: query row i sees key j iff lo(i) <= j < hi(i), with
//   lo(i) = max(0, i + diagonal - window_left),  hi(i) = min(seqlen_k, i + diagonal + window_right
//   + 1)
// and diagonal = seqlen_k - seqlen_q (bottom-right alignment). Causal is window_right = 0; no
// mask at all is both windows unbounded, leaving only the ragged end of the keys. From it
// follow the key blocks a query block visits (the others are fully masked: skipped) and which
// of them need the per-element predicate. Plain arithmetic: the host uses it too (to count the
// pairs a call computes), so the rule is written once.
#include "attention/parts/forward_params.cuh"
#include "attention/parts/mask_kind.cuh"

namespace flashjit {

/// Key blocks [begin, end) a query block visits.
struct BlockRange {
  int begin;
  int end;
  FJ_DEVICE bool empty() const { return begin >= end; }
};

template <MaskKind Kind>
struct KeyWindow {
  /// Without a window only the keys' end, seqlen_k, hides any: lo is 0 and hi is seqlen_k for
  /// every row.
  static constexpr bool kKeysEndOnly = Kind == MaskKind::none;
  int seqlen_k;
  int diagonal;
  int left;   // window_left, or kNoWindow
  int right;  // window_right, or kNoWindow

  /// From the forward or backward params (the same mask fields).
  template <class Params>
  FJ_DEVICE explicit KeyWindow(const Params& p)
      : seqlen_k(p.seqlen_k),
        diagonal(p.seqlen_k - p.seqlen_q),
        left(Kind == MaskKind::window ? p.window_left : AttentionForwardParams::kNoWindow),
        right(Kind == MaskKind::window ? p.window_right : AttentionForwardParams::kNoWindow) {}

  /// From the params' mask fields with one sequence's own lengths (a variable-length batch).
  template <class Params>
  FJ_DEVICE KeyWindow(const Params& p, int seqlen_q, int seqlen_k_)
      : seqlen_k(seqlen_k_),
        diagonal(seqlen_k_ - seqlen_q),
        left(Kind == MaskKind::window ? p.window_left : AttentionForwardParams::kNoWindow),
        right(Kind == MaskKind::window ? p.window_right : AttentionForwardParams::kNoWindow) {}

  /// From the rule's values (other tile programs' masks: multi-scale attention's decay window).
  FJ_DEVICE KeyWindow(int seqlen_k_, int diagonal_, int left_, int right_)
      : seqlen_k(seqlen_k_), diagonal(diagonal_), left(left_), right(right_) {}

  /// First visible key of query row `row` (64-bit: an unbounded window is 2^30 wide).
  FJ_DEVICE int lo(int row) const {
    const index_t first = index_t(row) + diagonal - left;
    return first < 0 ? 0 : first > seqlen_k ? seqlen_k : int(first);
  }
  /// One past the last visible key of query row `row`.
  FJ_DEVICE int hi(int row) const {
    const index_t end = index_t(row) + diagonal + right + 1;
    return end < 0 ? 0 : end > seqlen_k ? seqlen_k : int(end);
  }

  /// The key blocks of width `block_n` that rows [first_row, last_row] see any key in.
  FJ_DEVICE BlockRange key_blocks(int first_row, int last_row, int block_n) const {
    const int begin = lo(first_row), end = hi(last_row);
    if (end <= begin) return {0, 0};
    return {begin / block_n, ceil_div(end, block_n)};
  }

  /// The query blocks of height `block_m` with a row that sees a key in [first_key, last_key]
  /// (lo and hi grow with the row, so the rows form one interval).
  FJ_DEVICE BlockRange query_blocks(int first_key, int last_key, int block_m, int seqlen_q) const {
    // hi(i) > first_key  ⇔  i > first_key − diagonal − right − 1;
    // lo(i) <= last_key  ⇔  i <= last_key − diagonal + left.
    index_t begin = index_t(first_key) - diagonal - right;
    index_t end = index_t(last_key) - diagonal + left + 1;
    begin = begin < 0 ? 0 : begin;
    end = end > seqlen_q ? seqlen_q : end;
    if (end <= begin) return {0, 0};
    return {int(begin) / block_m, ceil_div(int(end), block_m)};
  }

  /// Whether every row in [first_row, last_row] sees every key of block [key0, key0 + block_n).
  FJ_DEVICE bool block_fully_visible(int first_row, int last_row, int key0, int block_n) const {
    return key0 >= lo(last_row) && key0 + block_n <= hi(first_row);
  }
};

}  // namespace flashjit
