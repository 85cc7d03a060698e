#pragma once
// How a CTA's warps split one (Rows, Cols) product in two dimensions: a RowWarps x ColWarps grid
// of warps, each computing a (Rows / RowWarps, Cols / ColWarps) block. Warps go down the rows
// first, one 16-row mma slab each at most, and split the columns with the rest, so a block that
// is short in rows (Bc keys of a 256-wide dK) still keeps every warp busy. The shape functions
// are constexpr for the host's config predicates.
#include "tile/platform.cuh"

namespace flashjit {

/// Warps along the rows when `warps` warps split a product of `rows` rows (16-row slabs).
constexpr int grid_row_warps(int rows, int warps) { return rows / 16 < warps ? rows / 16 : warps; }

/// Whether `warps` warps can split a (rows, cols) product into whole mma blocks: each warp's
/// block a multiple of 16 rows and of 16 columns (the products step two 8-column groups).
constexpr bool warp_grid_fits(int rows, int cols, int warps) {
  const int row_warps = grid_row_warps(rows, warps);
  return row_warps > 0 && warps % row_warps == 0 && rows % (row_warps * 16) == 0 &&
         cols % (warps / row_warps * 16) == 0;
}

/// One warp's block of a (Rows, Cols) product split over Warps warps.
template <int Rows, int Cols, int Warps>
struct WarpGrid {
  static_assert(warp_grid_fits(Rows, Cols, Warps),
                "the warps must split the product into blocks of whole 16 x 16 mma steps");
  static constexpr int kRowWarps = grid_row_warps(Rows, Warps);
  static constexpr int kColWarps = Warps / kRowWarps;
  static constexpr int kRows = Rows / kRowWarps;  // rows per warp
  static constexpr int kCols = Cols / kColWarps;  // columns per warp

  int row0;  // this warp's first row
  int col0;  // this warp's first column

  FJ_DEVICE explicit WarpGrid(int warp)
      : row0(warp / kColWarps * kRows), col0(warp % kColWarps * kCols) {}
};

}  // namespace flashjit
