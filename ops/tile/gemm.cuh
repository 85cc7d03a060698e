#pragma once
// Warp-level matrix products on mma.sync m16n8k16, fed from shared memory with ldmatrix or from
// registers. Each warp computes its own (rows, columns) block of a product: the offsets name
// where that block starts in the operands (a WarpGrid of tile/warp_grid.cuh gives them), so the
// warps of a CTA can split a product by rows, by columns or both.
#include "tile/operand_tile.cuh"

namespace flashjit {

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

/// Calls step(k) for k = 0, 16, ..., K − 16. Fully unrolled when the steps index a register
/// operand (an operand_tile indexed at run time would live in local memory); otherwise a few
/// steps at a time: unrolled fully, large head dims hoist every step's fragment loads and
/// spill, while four steps keep the loads ahead of the mmas without that.
template <int K, bool FullUnroll, typename Step>
FJ_DEVICE void for_each_k_step(Step step) {
  static_assert(K % 16 == 0, "whole m16n8k16 steps");
  if constexpr (FullUnroll) {
#pragma unroll
    for (int k = 0; k < K; k += 16) step(k);
  } else {
#pragma unroll 4
    for (int k = 0; k < K; k += 16) step(k);
  }
}

/// The block of acc += A · B over K whose A fragments `load_a_step(slab, k)` supplies (16 rows
/// by 16 k each) and whose B fragments `load_b_pair(b_frag, group, k)` supplies for two adjacent
/// 8-column groups: the loop every product below shares.
template <int K, bool FullUnroll, typename T, int Rows, int Cols, typename LoadA, typename LoadB>
FJ_DEVICE void mma_steps(acc_tile<Rows, Cols>& acc, LoadA load_a_step, LoadB load_b_pair) {
  static_assert(Cols % 16 == 0, "whole m16n8k16 steps");
  using Acc = acc_tile<Rows, Cols>;
  for_each_k_step<K, FullUnroll>([&](int k) {
    FragmentA a_frag[Acc::kSlabs];
#pragma unroll
    for (int s = 0; s < Acc::kSlabs; ++s) a_frag[s] = load_a_step(s, k);
#pragma unroll
    for (int g = 0; g < Acc::kGroups; g += 2) {
      FragmentB b_frag[2];
      load_b_pair(b_frag, g, k);
#pragma unroll
      for (int s = 0; s < Acc::kSlabs; ++s) {
        mma_m16n8k16<T>(acc.frag[s][g], a_frag[s], b_frag[0], acc.frag[s][g]);
        mma_m16n8k16<T>(acc.frag[s][g + 1], a_frag[s], b_frag[1], acc.frag[s][g + 1]);
      }
    }
  });
}

/// mma_steps with B = Xᵀ: rows [b_row0, b_row0 + Cols) of the shared tile `b` (its first K
/// columns) are B's columns.
template <typename T, int K, bool FullUnroll, int Rows, int Cols, int BRows, int BCols,
          typename LoadA>
FJ_DEVICE void mma_abt_steps(acc_tile<Rows, Cols>& acc, LoadA load_a_step,
                             smem_tile<T, BRows, BCols> b, int b_row0, int lane) {
  static_assert(Cols <= BRows && K <= BCols, "B's rows and columns must be in the tile");
  mma_steps<K, FullUnroll, T>(acc, load_a_step, [&](FragmentB(&b_frag)[2], int g, int k) {
    load_b_transposed(b_frag, b, b_row0 + g * 8, k, lane);
  });
}

/// acc += A · Bᵀ: A is rows [a_row0, a_row0 + Rows) of `a` (all its K columns), B rows
/// [b_row0, b_row0 + Cols) of `b` (all K columns): S = Q Kᵀ with K stored row-major.
template <typename T, int Rows, int Cols, int ARows, int BRows, int K>
FJ_DEVICE void mma_abt(acc_tile<Rows, Cols>& acc, smem_tile<T, ARows, K> a, int a_row0,
                       smem_tile<T, BRows, K> b, int b_row0, int lane) {
  mma_abt_steps<T, K, false>(
      acc, [&](int slab, int k) { return load_a(a, a_row0 + slab * 16, k, lane); }, b, b_row0,
      lane);
}

/// mma_abt with B's first Cols rows.
template <typename T, int Rows, int Cols, int ARows, int BRows, int K>
FJ_DEVICE void mma_abt(acc_tile<Rows, Cols>& acc, smem_tile<T, ARows, K> a, int a_row0,
                       smem_tile<T, BRows, K> b, int lane) {
  mma_abt(acc, a, a_row0, b, 0, lane);
}

/// acc += A · Bᵀ with A held in registers and B the first Cols rows of `b` (its first K
/// columns): S = Q Kᵀ with Q loaded once for every key block.
template <typename T, int Rows, int Cols, int K, int BRows, int BCols>
FJ_DEVICE void mma_abt(acc_tile<Rows, Cols>& acc, const operand_tile<T, Rows, K>& a,
                       smem_tile<T, BRows, BCols> b, int lane) {
  mma_abt_steps<T, K, true>(
      acc, [&](int slab, int k) { return a.frag[slab][k / 16]; }, b, 0, lane);
}

/// mma_steps with B = X: columns [b_col0, b_col0 + Cols) of the row-major shared tile `b`, all
/// of its first K rows.
template <typename T, int K, bool FullUnroll, int Rows, int Cols, int BRows, int BCols,
          typename LoadA>
FJ_DEVICE void mma_ab_steps(acc_tile<Rows, Cols>& acc, LoadA load_a_step,
                            smem_tile<T, BRows, BCols> b, int b_col0, int lane) {
  static_assert(K <= BRows && Cols <= BCols, "B's rows and columns must be in the tile");
  mma_steps<K, FullUnroll, T>(acc, load_a_step, [&](FragmentB(&b_frag)[2], int g, int k) {
    load_b(b_frag, b, k, b_col0 + g * 8, lane);
  });
}

/// acc += A · B: A held in registers (Rows, K), B the first K rows and Cols columns of `b`:
/// O += P V with P rounded once (to_operand) and V stored row-major.
template <typename T, int Rows, int Cols, int K, int BRows, int BCols>
FJ_DEVICE void mma_ab(acc_tile<Rows, Cols>& acc, const operand_tile<T, Rows, K>& a,
                      smem_tile<T, BRows, BCols> b, int lane) {
  mma_ab_steps<T, K, true>(
      acc, [&](int slab, int k) { return a.frag[slab][k / 16]; }, b, 0, lane);
}

/// acc += A · B: A rows [a_row0, a_row0 + Rows) of the shared tile `a` (all its K columns), B
/// columns [b_col0, b_col0 + Cols) of `b` (its first K rows): dV += Pᵀ dO with Pᵀ staged in
/// shared memory.
template <typename T, int Rows, int Cols, int ARows, int K, int BRows, int BCols>
FJ_DEVICE void mma_ab(acc_tile<Rows, Cols>& acc, smem_tile<T, ARows, K> a, int a_row0,
                      smem_tile<T, BRows, BCols> b, int b_col0, int lane) {
  mma_ab_steps<T, K, false>(
      acc, [&](int slab, int k) { return load_a(a, a_row0 + slab * 16, k, lane); }, b, b_col0,
      lane);
}

/// acc += Aᵀ · B: Aᵀ's rows are columns [a_col0, a_col0 + Rows) of the shared tile `a` (all its
/// K rows), B columns [b_col0, b_col0 + Cols) of `b`: dQ += dS K with dSᵀ staged in shared
/// memory.
template <typename T, int Rows, int Cols, int K, int ACols, int BRows, int BCols>
FJ_DEVICE void mma_atb(acc_tile<Rows, Cols>& acc, smem_tile<T, K, ACols> a, int a_col0,
                       smem_tile<T, BRows, BCols> b, int b_col0, int lane) {
  mma_ab_steps<T, K, false>(
      acc, [&](int slab, int k) { return load_a_transposed(a, a_col0 + slab * 16, k, lane); }, b,
      b_col0, lane);
}

}  // namespace flashjit
