#pragma once
// Writing a warp's accumulator block into a shared tile, rounded to the tile's 16-bit type: for
// another warp's product (the backward's Pᵀ and dSᵀ) or for staging finished rows.
#include "tile/register_tile.cuh"
#include "tile/shared_tile.cuh"

namespace flashjit {

/// Writes this warp's accumulator block, rounded to T, to rows [row0, row0 + Rows), columns
/// [col0, col0 + Cols) of the shared tile `dst` (for another warp's product, or staging):
/// any shared layout whose at(row, col) finds an element and keeps pairs of columns
/// 2j, 2j + 1 adjacent (smem_tile; swizzled_tile, whose stores the async proxy then reads
/// after a fence_proxy_async).
template <template <typename, int, int> class Tile, typename T, int TileRows, int TileCols,
          int Rows, int Cols>
FJ_DEVICE void store_fragments(const acc_tile<Rows, Cols>& acc, Tile<T, TileRows, TileCols> dst,
                               int row0, int col0, int lane) {
  static_assert(Rows <= TileRows && Cols <= TileCols, "the block fits the tile");
#pragma unroll
  for (int s = 0; s < acc.kSlabs; ++s)
#pragma unroll
    for (int g = 0; g < acc.kGroups; ++g)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        T* pair = dst.at(row0 + fragment_row(s, half, lane), col0 + fragment_col(g, 0, lane));
        store_shared(reinterpret_cast<unsigned*>(pair), 0,
                     pack2<T>(acc.frag[s][g][2 * half], acc.frag[s][g][2 * half + 1]));
      }
}

}  // namespace flashjit
