#pragma once
// Writes a value into the rows a call did not use (Sequences::seqused_q, and seqlens_k in the
// backward): o's and the gradients' rows 0, lse's -inf, so that no row past the used ones keeps
// whatever the caller's buffer held (a gradient of garbage would flow on into the layers before
// the attention). Grid (blocks, batch); each block's threads take sequence blockIdx.y's unused
// elements in turn.
#include "attention/inference/unused_rows_params.cuh"
#include "attention/parts/sequence_span.cuh"

namespace flashjit {

template <typename T>
FJ_GLOBAL void __launch_bounds__(kUnusedRowsThreads) unused_rows_kernel(UnusedRowsParams p) {
  const int batch = int(blockIdx.y);
  index_t start = 0;
  int rows = p.seqlen;
  if (p.cu_seqlens != nullptr) {
    const SequenceSpan span = sequence_span(p.cu_seqlens, batch);
    start = span.start;
    rows = span.length;
  }
  const int used = load_global_index(p.used, batch);
  const index_t row_elements = index_t(p.heads) * p.width;
  const index_t elements = index_t(rows - used) * row_elements;
  T* first = p.rows.rows<T>(batch, 0, int(start + used));
  const index_t step = index_t(gridDim.x) * kUnusedRowsThreads;
  for (index_t e = index_t(blockIdx.x) * kUnusedRowsThreads + threadIdx.x; e < elements;
       e += step) {
    const index_t row = e / row_elements;
    const int head = int(e % row_elements) / p.width, column = int(e % row_elements) % p.width;
    store_global(first, row * p.rows.row_stride + head * p.rows.head_stride + column, p.value);
  }
}

}  // namespace flashjit
