#pragma once
// A warp's 16-bit tile in registers in the mma A-fragment layout: an operand read by several
// products (Q, kept for every key block) or rounded once before its product (P, so that its
// fp32 scores are dead while V streams past: half the registers during O += P V).
#include "tile/ldmatrix.cuh"
#include "tile/register_tile.cuh"
#include "tile/shared_tile.cuh"

namespace flashjit {

/// (Rows, Cols) elements of T over a warp: Rows / 16 x Cols / 16 A fragments. Index it only
/// with constants (fully unrolled loops): a register array indexed at run time lives in local
/// memory.
template <typename T, int Rows, int Cols>
struct operand_tile {
  static_assert(Rows % 16 == 0 && Cols % 16 == 0, "operand tiles are whole m16k16 fragments");
  static constexpr int kSlabs = Rows / 16;  // 16-row slabs
  static constexpr int kSteps = Cols / 16;  // 16-column k steps
  FragmentA frag[kSlabs][kSteps];
};

/// The A fragment for rows [row0, row0 + 16), columns [col0, col0 + 16) of a shared tile:
/// lanes 0-7 address rows 0-7 of columns 0-7 (a0), lanes 8-15 rows 8-15 (a1), lanes 16-23
/// rows 0-7 of columns 8-15 (a2), lanes 24-31 rows 8-15 of columns 8-15 (a3).
template <typename T, int Rows, int Cols>
FJ_DEVICE FragmentA load_a(smem_tile<T, Rows, Cols> tile, int row0, int col0, int lane) {
  const int matrix = lane / 8;
  FragmentA a;
  ldmatrix_x4(a.regs, tile.at(row0 + lane % 8 + matrix % 2 * 8, col0 + matrix / 2 * 8));
  return a;
}

/// Rows [row0, row0 + Rows) of a shared tile, its first Cols columns.
template <typename T, int Rows, int Cols, int TileRows, int TileCols>
FJ_DEVICE void load_operand(operand_tile<T, Rows, Cols>& a, smem_tile<T, TileRows, TileCols> tile,
                            int row0, int lane) {
  static_assert(Cols <= TileCols, "the operand's columns must be in the tile");
#pragma unroll
  for (int s = 0; s < a.kSlabs; ++s)
#pragma unroll
    for (int k = 0; k < a.kSteps; ++k) a.frag[s][k] = load_a(tile, row0 + s * 16, k * 16, lane);
}

/// `acc` rounded to T: the C layout of two adjacent 8-column groups is the A layout of one
/// 16-column step.
template <typename T, int Rows, int Cols>
FJ_DEVICE operand_tile<T, Rows, Cols> to_operand(const acc_tile<Rows, Cols>& acc) {
  operand_tile<T, Rows, Cols> a;
#pragma unroll
  for (int s = 0; s < a.kSlabs; ++s)
#pragma unroll
    for (int k = 0; k < a.kSteps; ++k) {
      const float(&left)[4] = acc.frag[s][2 * k];
      const float(&right)[4] = acc.frag[s][2 * k + 1];
      a.frag[s][k] = {{pack2<T>(left[0], left[1]), pack2<T>(left[2], left[3]),
                       pack2<T>(right[0], right[1]), pack2<T>(right[2], right[3])}};
    }
  return a;
}

}  // namespace flashjit
