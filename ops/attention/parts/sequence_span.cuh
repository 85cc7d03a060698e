#pragma once
// Where sequence b's rows are in a packed tensor: read from its cu_seqlens array once, by the
// forward (attention/parts/forward_block.cuh), the backward's rebase
// (attention/parts/backward_sequence.cuh) and the index check
// (attention/inference/index_check_kernel.cuh).
#include "tile/memory.cuh"

namespace flashjit {

/// Rows [start, start + length) of a packed tensor.
struct SequenceSpan {
  index_t start;
  int length;
};

/// Sequence `batch`'s span from `cu_seqlens` ([batch + 1] offsets; a decreasing pair gives a
/// negative length, which the index checks reject before any launch).
FJ_DEVICE SequenceSpan sequence_span(const int* cu_seqlens, int batch) {
  const int start = load_global_index(cu_seqlens, batch);
  return {start, load_global_index(cu_seqlens, batch + 1) - start};
}

}  // namespace flashjit
