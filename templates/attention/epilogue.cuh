#pragma once
// The end of an attention kernel: a warp's finished rows (O, dQ, dK, dV) go out through shared
// memory, so global writes are whole 16-byte chunks of consecutive columns; LSE goes straight
// out.
#include "tile/fragment_store.cuh"

namespace flashjit {

/// Writes this warp's rows [warp_row0, warp_row0 + Rows) of `acc` (rounded to T), columns
/// [0, Cols), to `dst` (row 0 of the block; rows `row_stride` apart) for the block's first
/// `rows` rows. Staging goes through the same rows of the shared tile `staging`, which only
/// this warp may have used.
template <int Cols, typename T, int Rows, int AccCols, int TileRows, int TileCols>
FJ_DEVICE void store_rows(const acc_tile<Rows, AccCols>& acc,
                          smem_tile<T, TileRows, TileCols> staging, T* dst, index_t row_stride,
                          int warp_row0, int rows, int lane) {
  store_fragments(acc, staging, warp_row0, 0, lane);
  __syncwarp();
  store_rows_from_shared<Rows, Cols>(dst + warp_row0 * row_stride, row_stride, staging, warp_row0,
                                     rows - warp_row0, lane);
}

/// Writes this warp's rows of LSE (`lse` points at the block's row 0) for the first `rows`.
template <int Rows>
FJ_DEVICE void store_lse(const row_vec<Rows>& lse, float* dst, int warp_row0, int rows, int lane) {
  if (dst == nullptr || lane % 4 != 0) return;  // a quad's lanes hold the same value
#pragma unroll
  for (int s = 0; s < Rows / 16; ++s)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_row0 + fragment_row(s, half, lane);
      if (row < rows) store_global(dst, row, lse.v[2 * s + half]);
    }
}

}  // namespace flashjit
