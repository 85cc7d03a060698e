#pragma once
// Writing a warp's accumulator block into a shared tile, rounded to the tile's 16-bit type: for
// another warp's product (the backward's Pᵀ and dSᵀ) or for staging finished rows.
#include "tile/register_tile.cuh"
#include "tile/shared_tile.cuh"

namespace flashjit {

/// Calls f(slab, group, half, pair) for each pair of adjacent columns this lane holds of `acc`
/// (fragment elements 2·half and 2·half + 1), `pair` the two rounded to T and packed in one
/// 32-bit word: the walk of every store of accumulators into a 16-bit tile. The pair is at row
/// fragment_row(slab, half, lane), columns fragment_col(group, 0 and 1, lane).
template <typename T, int Rows, int Cols, typename F>
FJ_DEVICE void for_each_packed_pair(const acc_tile<Rows, Cols>& acc, F f) {
#pragma unroll
  for (int s = 0; s < acc.kSlabs; ++s)
#pragma unroll
    for (int g = 0; g < acc.kGroups; ++g)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        f(s, g, half, pack2<T>(acc.frag[s][g][2 * half], acc.frag[s][g][2 * half + 1]));
      }
}

/// Writes this warp's accumulator block, rounded to T, to rows [row0, row0 + Rows), columns
/// [col0, col0 + Cols) of the shared tile `dst` (for another warp's product, or staging):
/// any shared layout whose at(row, col) finds an element and keeps pairs of columns
/// 2j, 2j + 1 adjacent (smem_tile; swizzled_tile has its own, with its addressing hoisted).
template <template <typename, int, int> class Tile, typename T, int TileRows, int TileCols,
          int Rows, int Cols>
FJ_DEVICE void store_fragments(const acc_tile<Rows, Cols>& acc, Tile<T, TileRows, TileCols> dst,
                               int row0, int col0, int lane) {
  static_assert(Rows <= TileRows && Cols <= TileCols, "the block fits the tile");
  for_each_packed_pair<T>(acc, [&](int s, int g, int half, unsigned pair) {
    T* at = dst.at(row0 + fragment_row(s, half, lane), col0 + fragment_col(g, 0, lane));
    store_shared(reinterpret_cast<unsigned*>(at), 0, pair);
  });
}

}  // namespace flashjit
