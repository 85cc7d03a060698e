#pragma once
// Warp-level matrix products on mma.sync m16n8k16, fed from shared memory with ldmatrix or from
// registers. Each warp computes its own (rows, columns) block of a product: the offsets name
// where that block starts in the operands (a WarpGrid of tile/warp_grid.cuh gives them), so the
// warps of a CTA can split a product by rows, by columns or both.
#include "tile/ldmatrix.cuh"
#include "tile/register_tile.cuh"
#include "tile/shared_tile.cuh"

namespace flashjit {

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

/// The A fragment for rows [row0, row0 + 16), columns [col0, col0 + 16) of A = Xᵀ, where X is a
/// row-major shared tile whose rows are A's k and columns A's rows: transposing loads of
/// X (k 0-7, rows 0-7) (a0), (k 0-7, rows 8-15) (a1), (k 8-15, rows 0-7) (a2), (k 8-15, rows
/// 8-15) (a3).
template <typename T, int Rows, int Cols>
FJ_DEVICE FragmentA load_a_transposed(smem_tile<T, Rows, Cols> tile, int row0, int col0, int lane) {
  const int matrix = lane / 8;
  FragmentA a;
  ldmatrix_x4_trans(a.regs, tile.at(col0 + lane % 8 + matrix / 2 * 8, row0 + matrix % 2 * 8));
  return a;
}

/// The B fragments of two adjacent 8-column groups for B = Xᵀ, where X is a row-major shared
/// tile whose rows [row0, row0 + 16) are B's columns and columns [col0, col0 + 16) are B's k:
/// matrices (rows 0-7, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 0-7), (rows 8-15, k 8-15).
template <typename T, int Rows, int Cols>
FJ_DEVICE void load_b_transposed(FragmentB (&b)[2], smem_tile<T, Rows, Cols> tile, int row0,
                                 int col0, int lane) {
  const int matrix = lane / 8;
  unsigned regs[4];
  ldmatrix_x4(regs, tile.at(row0 + lane % 8 + matrix / 2 * 8, col0 + matrix % 2 * 8));
  b[0] = {{regs[0], regs[1]}};
  b[1] = {{regs[2], regs[3]}};
}

/// The B fragments of two adjacent 8-column groups [col0, col0 + 16) for B = X, where X is a
/// row-major shared tile whose rows [row0, row0 + 16) are B's k: transposing loads of
/// (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
template <typename T, int Rows, int Cols>
FJ_DEVICE void load_b(FragmentB (&b)[2], smem_tile<T, Rows, Cols> tile, int row0, int col0,
                      int lane) {
  const int matrix = lane / 8;
  unsigned regs[4];
  ldmatrix_x4_trans(regs, tile.at(row0 + lane % 8 + matrix % 2 * 8, col0 + matrix / 2 * 8));
  b[0] = {{regs[0], regs[1]}};
  b[1] = {{regs[2], regs[3]}};
}

/// acc += A · Bᵀ: A is rows [a_row0, a_row0 + Rows) of `a` (all its K columns), B rows
/// [b_row0, b_row0 + Cols) of `b` (all K columns): S = Q Kᵀ with K stored row-major.
template <typename T, int Rows, int Cols, int ARows, int BRows, int K>
FJ_DEVICE void mma_abt(acc_tile<Rows, Cols>& acc, smem_tile<T, ARows, K> a, int a_row0,
                       smem_tile<T, BRows, K> b, int b_row0, int lane) {
  static_assert(K % 16 == 0 && Cols % 16 == 0 && Cols <= BRows, "whole m16n8k16 steps");
  using Acc = acc_tile<Rows, Cols>;
  // Unrolled fully, large head dims hoist every step's fragment loads and spill; a few steps
  // at a time keep the loads ahead of the mmas without that.
#pragma unroll 4
  for (int k = 0; k < K; k += 16) {
    FragmentA a_frag[Acc::kSlabs];
#pragma unroll
    for (int s = 0; s < Acc::kSlabs; ++s) a_frag[s] = load_a(a, a_row0 + s * 16, k, lane);
#pragma unroll
    for (int g = 0; g < Acc::kGroups; g += 2) {
      FragmentB b_frag[2];
      load_b_transposed(b_frag, b, b_row0 + g * 8, k, lane);
#pragma unroll
      for (int s = 0; s < Acc::kSlabs; ++s) {
        mma_m16n8k16<T>(acc.frag[s][g], a_frag[s], b_frag[0], acc.frag[s][g]);
        mma_m16n8k16<T>(acc.frag[s][g + 1], a_frag[s], b_frag[1], acc.frag[s][g + 1]);
      }
    }
  }
}

/// mma_abt with B's first Cols rows.
template <typename T, int Rows, int Cols, int ARows, int BRows, int K>
FJ_DEVICE void mma_abt(acc_tile<Rows, Cols>& acc, smem_tile<T, ARows, K> a, int a_row0,
                       smem_tile<T, BRows, K> b, int lane) {
  mma_abt(acc, a, a_row0, b, 0, lane);
}

/// The A fragment of columns [16k, 16k + 16) of an accumulator tile's slab, rounded to T: the
/// C layout of two adjacent 8-column groups is the A layout of one 16-column step.
template <typename T, int Rows, int Cols>
FJ_DEVICE FragmentA to_a_fragment(const acc_tile<Rows, Cols>& p, int slab, int k) {
  const float(&left)[4] = p.frag[slab][2 * k];
  const float(&right)[4] = p.frag[slab][2 * k + 1];
  return {{pack2<T>(left[0], left[1]), pack2<T>(left[2], left[3]), pack2<T>(right[0], right[1]),
           pack2<T>(right[2], right[3])}};
}

/// The block of acc += A · B whose A fragments `load_a_step(slab, k)` supplies (16 rows by 16
/// k each) and whose B is columns [b_col0, b_col0 + Cols) of the row-major shared tile `b`, all
/// of its first K rows: the loop the shared-memory products below share.
template <typename T, int K, int Rows, int Cols, int BRows, int BCols, typename LoadA>
FJ_DEVICE void mma_ab_steps(acc_tile<Rows, Cols>& acc, LoadA load_a_step,
                            smem_tile<T, BRows, BCols> b, int b_col0, int lane) {
  static_assert(K % 16 == 0 && Cols % 16 == 0 && K <= BRows && Cols <= BCols,
                "whole m16n8k16 steps");
  using Acc = acc_tile<Rows, Cols>;
#pragma unroll 4
  for (int k = 0; k < K; k += 16) {
    FragmentA a_frag[Acc::kSlabs];
#pragma unroll
    for (int s = 0; s < Acc::kSlabs; ++s) a_frag[s] = load_a_step(s, k);
#pragma unroll
    for (int g = 0; g < Acc::kGroups; g += 2) {
      FragmentB b_frag[2];
      load_b(b_frag, b, k, b_col0 + g * 8, lane);
#pragma unroll
      for (int s = 0; s < Acc::kSlabs; ++s) {
        mma_m16n8k16<T>(acc.frag[s][g], a_frag[s], b_frag[0], acc.frag[s][g]);
        mma_m16n8k16<T>(acc.frag[s][g + 1], a_frag[s], b_frag[1], acc.frag[s][g + 1]);
      }
    }
  }
}

/// acc += P · B: P a register tile (Rows, K) rounded to T on the fly, B the first K rows and
/// Cols columns of `b`: O += P V with V stored row-major.
template <typename T, int Rows, int Cols, int K, int BRows, int BCols>
FJ_DEVICE void mma_ab(acc_tile<Rows, Cols>& acc, const acc_tile<Rows, K>& p,
                      smem_tile<T, BRows, BCols> b, int lane) {
  mma_ab_steps<T, K>(
      acc, [&](int slab, int k) { return to_a_fragment<T>(p, slab, k / 16); }, b, 0, lane);
}

/// acc += A · B: A rows [a_row0, a_row0 + Rows) of the shared tile `a` (all its K columns), B
/// columns [b_col0, b_col0 + Cols) of `b` (its first K rows): dV += Pᵀ dO with Pᵀ staged in
/// shared memory.
template <typename T, int Rows, int Cols, int ARows, int K, int BRows, int BCols>
FJ_DEVICE void mma_ab(acc_tile<Rows, Cols>& acc, smem_tile<T, ARows, K> a, int a_row0,
                      smem_tile<T, BRows, BCols> b, int b_col0, int lane) {
  mma_ab_steps<T, K>(
      acc, [&](int slab, int k) { return load_a(a, a_row0 + slab * 16, k, lane); }, b, b_col0,
      lane);
}

/// acc += Aᵀ · B: Aᵀ's rows are columns [a_col0, a_col0 + Rows) of the shared tile `a` (all its
/// K rows), B columns [b_col0, b_col0 + Cols) of `b`: dQ += dS K with dSᵀ staged in shared
/// memory.
template <typename T, int Rows, int Cols, int K, int ACols, int BRows, int BCols>
FJ_DEVICE void mma_atb(acc_tile<Rows, Cols>& acc, smem_tile<T, K, ACols> a, int a_col0,
                       smem_tile<T, BRows, BCols> b, int b_col0, int lane) {
  mma_ab_steps<T, K>(
      acc, [&](int slab, int k) { return load_a_transposed(a, a_col0 + slab * 16, k, lane); }, b,
      b_col0, lane);
}

}  // namespace flashjit
