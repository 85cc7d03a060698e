#pragma once
// The layout of dQ's fp32 sums (params.dq_accum) when the Hopper backward adds them: rows of
// head_dim floats as usual, but each row's columns permuted by an XOR of a few bits of its row
// index, so that the consumers' stores of their wgmma accumulators into the staging block
// (which the bulk reduction copies as it is) spread over the shared memory banks: a store
// covers 8 rows at the same 8 columns, and rows of 64 or 128 floats would all start on bank 0.
// The dQ-convert kernel undoes the permutation. The mma.sync kernels keep plain rows.
#include "tile/platform.cuh"

namespace flashjit {

/// The column XOR for row `row` (counted from dq_accum's start) of head_dim `head_dim`: bits
/// 3–5 of the column take bits 0–2 of the row, or fewer where head_dim is not a multiple of 64
/// (the permutation stays inside each aligned run of 8·2^k columns that head_dim is made of).
/// Rows r..r+3 then differ in bits 3–4, the 32-byte bank group, where the row stride is a
/// multiple of the 128 bytes the 32 banks span.
FJ_HOST_DEVICE constexpr int dq_accum_column_xor(int head_dim, index_t row) {
  const int row_bits = head_dim % 64 == 0 ? 7 : head_dim % 32 == 0 ? 3 : head_dim % 16 == 0 ? 1 : 0;
  return int(row & row_bits) << 3;
}

}  // namespace flashjit
