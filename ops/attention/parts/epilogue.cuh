#pragma once
// The end of an attention kernel: a warp's finished rows (O, dQ, dK, dV) go out through shared
// memory, so global writes are whole 16-byte chunks of consecutive columns; LSE goes straight
// out.
#include "tile/fragment_store.cuh"

namespace flashjit {

/// Writes this warp's rows [warp_row0, warp_row0 + Rows) of `acc` (rounded to T), columns
/// [0, Cols) (the first `cols_valid` of them, a multiple of 8: O's value head dim), to `dst`
/// (row 0 of the block; rows `row_stride` apart) for the block's first `rows` rows. Staging
/// goes through the same rows of the shared tile `staging`, which only this warp may have used.
template <int Cols, typename T, int Rows, int AccCols, int TileRows, int TileCols>
FJ_DEVICE void store_rows(const acc_tile<Rows, AccCols>& acc,
                          smem_tile<T, TileRows, TileCols> staging, T* dst, index_t row_stride,
                          int warp_row0, int rows, int lane, int cols_valid = Cols) {
  store_fragments(acc, staging, warp_row0, 0, lane);
  __syncwarp();
  store_rows_from_shared<Rows, Cols>(dst + warp_row0 * row_stride, row_stride, staging, warp_row0,
                                     rows - warp_row0, lane, cols_valid);
}

/// store_rows for rows that are not evenly spaced: tile row t goes to `row_at(t)`.
template <int Cols, typename T, int Rows, int AccCols, int TileRows, int TileCols, class RowAt>
FJ_DEVICE void store_rows_at(const acc_tile<Rows, AccCols>& acc,
                             smem_tile<T, TileRows, TileCols> staging, const RowAt& row_at,
                             int warp_row0, int rows, int lane, int cols_valid = Cols) {
  store_fragments(acc, staging, warp_row0, 0, lane);
  __syncwarp();
  store_rows_from_shared_to<Rows, Cols>(row_at, staging, warp_row0, rows - warp_row0, lane,
                                        cols_valid);
}

/// Writes this warp's rows of `acc` in fp32, columns [0, cols), straight from the fragments:
/// tile row t's values go to `row_at(t)` (split-KV's partial O, kept in fp32 so the merge
/// loses nothing).
template <int Rows, int AccCols, class RowAt>
FJ_DEVICE void store_rows_fp32(acc_tile<Rows, AccCols>& acc, const RowAt& row_at, int warp_row0,
                               int rows, int cols, int lane) {
  for_each_element(acc, lane, [&](int r, int c, float& value) {
    if (warp_row0 + r < rows && c < cols) store_global(row_at(warp_row0 + r), c, value);
  });
}

/// store_lse for rows that are not evenly spaced: tile row t's LSE goes to `*lse_at(t)`.
template <int Rows, class LseAt>
FJ_DEVICE void store_lse_to(const row_vec<Rows>& lse, const LseAt& lse_at, int warp_row0, int rows,
                            int lane) {
  if (lane % 4 != 0) return;  // a quad's lanes hold the same value
#pragma unroll
  for (int s = 0; s < Rows / 16; ++s)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_row0 + fragment_row(s, half, lane);
      if (row < rows) store_global(lse_at(row), 0, lse.v[2 * s + half]);
    }
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
