#pragma once
// The merge kernels' run-time arguments, structs shared by the host (which fills them) and the
// kernels (which take them by value). Both forms answer the same questions (how many partials,
// where partial i's row and LSE are, where the result goes), so one row routine serves both.
// Element types are the config's; strides are in elements.
#include "tile/platform.cuh"

namespace flashjit {

/// A strided [tokens, heads, head_dim] tensor with unit head_dim stride.
struct TokenHeadRows {
  void* data;  // the element type is the config's
  index_t token_stride;
  index_t head_stride;

  /// The head_dim values of (token, head).
  template <typename T>
  FJ_DEVICE T* row(index_t token, int head) const {
    return static_cast<T*>(data) + token * token_stride + head * head_stride;
  }
};

/// A strided fp32 [tokens, heads] tensor of natural-log LSEs; data nullptr: absent.
struct TokenHeadLse {
  float* data;
  index_t token_stride;
  index_t head_stride;

  FJ_DEVICE float* at(index_t token, int head) const {
    return data + token * token_stride + head * head_stride;
  }
};

/// Arguments of merge_states_kernel: `partials` states stacked along a leading axis, merged
/// into an output that shares no memory with them.
struct MergeStatesParams {
  TokenHeadRows partial_o;   // (partials, tokens, heads, head_dim) at partial 0
  TokenHeadLse partial_lse;  // (partials, tokens, heads) at partial 0
  index_t partial_o_stride;  // elements from one partial's O to the next's
  index_t partial_lse_stride;
  TokenHeadRows o;   // (tokens, heads, head_dim), written
  TokenHeadLse lse;  // (tokens, heads), written; data nullptr: skipped
  index_t tokens;
  int heads;
  int head_dim;
  int partials;

  static constexpr bool kInPlace = false;
  FJ_DEVICE int count() const { return partials; }
  template <typename T>
  FJ_DEVICE const T* part_row(int i, index_t token, int head) const {
    return partial_o.row<T>(token, head) + i * partial_o_stride;  // (head_dim,)
  }
  FJ_DEVICE const float* part_lse(int i, index_t token, int head) const {
    return partial_lse.at(token, head) + i * partial_lse_stride;
  }
  FJ_DEVICE const TokenHeadRows& out_o() const { return o; }
  FJ_DEVICE const TokenHeadLse& out_lse() const { return lse; }
};

/// Arguments of merge_state_pair_kernel: state b merged into state a, in place (cascade
/// attention: the shared prefix's state absorbs each request's own).
struct MergeStatePairParams {
  TokenHeadRows o_a;   // (tokens, heads, head_dim), read and written
  TokenHeadLse lse_a;  // (tokens, heads), read and written
  TokenHeadRows o_b;   // (tokens, heads, head_dim)
  TokenHeadLse lse_b;  // (tokens, heads)
  index_t tokens;
  int heads;
  int head_dim;

  static constexpr bool kInPlace = true;
  FJ_DEVICE int count() const { return 2; }
  template <typename T>
  FJ_DEVICE const T* part_row(int i, index_t token, int head) const {
    return (i == 0 ? o_a : o_b).row<T>(token, head);  // (head_dim,)
  }
  FJ_DEVICE const float* part_lse(int i, index_t token, int head) const {
    return (i == 0 ? lse_a : lse_b).at(token, head);
  }
  FJ_DEVICE const TokenHeadRows& out_o() const { return o_a; }
  FJ_DEVICE const TokenHeadLse& out_lse() const { return lse_a; }
};

}  // namespace flashjit
