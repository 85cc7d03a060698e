#pragma once
// Where one (batch, head)'s rows live: the strided tensors the attention kernels take, and the
// slice of them one CTA works on.
#include "tile/platform.cuh"

namespace flashjit {

/// A strided [batch, seqlen, heads, head_dim] tensor with unit head_dim stride. Strides are in
/// elements and 64-bit, so [B, L, H, D] and [B, H, L, D] (and padded variants) need no copy.
struct HeadTensor {
  void* data;  // the element type is the config's (written only for o)
  index_t batch_stride;
  index_t row_stride;  // between consecutive sequence positions
  index_t head_stride;

  /// Sequence position `row` of head `head` in batch `batch`: the first of that head's rows
  /// from there on, `row_stride` apart. 64-bit offsets (strides are index_t).
  template <typename T>
  FJ_DEVICE T* rows(int batch, int head, int row) const {
    return static_cast<T*>(data) + batch * batch_stride + head * head_stride + row * row_stride;
  }
};

/// LSE of rows [row0, ...) of (batch, head), unit stride, from params with the LSE fields
/// (forward and backward); nullptr when the call skips LSE.
template <class Params>
FJ_DEVICE auto lse_rows(const Params& p, int batch, int head, int row0) {
  return p.lse ? p.lse + batch * p.lse_batch_stride + head * p.lse_head_stride + row0 : nullptr;
}

/// One CTA's slice of a query-major kernel's tensors: (batch, head) fixed, first query row
/// `row0`; `out` is what the kernel writes per query row (O in the forward, dQ in the backward).
template <typename T>
struct HeadSlice {
  const T* q;  // (rows, head_dim), row 0 = the block's first query row
  const T* k;  // (seqlen_k, head_dim)
  const T* v;  // (seqlen_k, head_dim)
  T* out;      // (rows, head_dim)
  float* lse;  // (rows,), nullptr: not written
  index_t q_row_stride, k_row_stride, v_row_stride, out_row_stride;
};

/// The slice of (batch, head) from row `row0` on, from params with q, k, v and heads_per_kv
/// (forward and backward), writing `out` and `lse` (nullptr: none).
template <typename T, class Params>
FJ_DEVICE HeadSlice<T> head_slice(const Params& p, const HeadTensor& out, float* lse, int batch,
                                  int head, int row0) {
  const int kv_head = head / p.heads_per_kv;  // GQA/MQA: heads_per_kv query heads share one
  return {p.q.template rows<T>(batch, head, row0),
          p.k.template rows<T>(batch, kv_head, 0),
          p.v.template rows<T>(batch, kv_head, 0),
          out.rows<T>(batch, head, row0),
          lse,
          p.q.row_stride,
          p.k.row_stride,
          p.v.row_stride,
          out.row_stride};
}

}  // namespace flashjit
