#pragma once
// A warp's fp32 accumulator tile in registers, in the mma C-fragment layout, and the row-wise
// operations attention needs on it. With g = lane / 4 and t = lane % 4, a lane holds rows
// 16i + g and 16i + g + 8 of every 16-row slab i, columns 8j + 2t and 8j + 2t + 1 of every
// 8-column group j; the 4 lanes of a quad (same g) share a row.
#include "tile/mma.cuh"
#include "tile/warp.cuh"

namespace flashjit {

/// Where one of a lane's elements of an accumulator tile sits: its row and column in the tile,
/// and its register (frag[slab][group][e]), which reaches the same element of any tile of the
/// same shape.
struct ElementSlot {
  int row, col;
  int slab, group, e;
};

/// (Rows, Cols) fp32 values spread over a warp: Rows / 16 x Cols / 8 mma accumulators.
template <int Rows, int Cols>
struct acc_tile {
  static_assert(Rows % 16 == 0 && Cols % 8 == 0, "accumulator tiles are whole m16n8 blocks");
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kSlabs = Rows / 16;  // 16-row slabs
  static constexpr int kGroups = Cols / 8;  // 8-column groups
  static constexpr int kRowsPerLane = kSlabs * 2;
  float frag[kSlabs][kGroups][4];

  FJ_DEVICE float& operator[](const ElementSlot& x) { return frag[x.slab][x.group][x.e]; }
  FJ_DEVICE float operator[](const ElementSlot& x) const { return frag[x.slab][x.group][x.e]; }
};

/// One value per row of a (Rows, ·) accumulator tile: the lane's kRowsPerLane rows, in the
/// order slab 0 row g, slab 0 row g + 8, slab 1 row g, ...
template <int Rows>
struct row_vec {
  float v[Rows / 16 * 2];
};

/// One value per column of a (·, Cols) accumulator tile: the lane's columns 8j + 2t and
/// 8j + 2t + 1 of every 8-column group j, as v[j][0] and v[j][1].
template <int Cols>
struct col_vec {
  float v[Cols / 8][2];
};

/// The row (within the tile) of fragment slab `slab`, half `half` (0: g, 1: g + 8) for `lane`.
FJ_DEVICE int fragment_row(int slab, int half, int lane) { return slab * 16 + half * 8 + lane / 4; }
/// The column (within the tile) of fragment group `group`, element `pair` (0 or 1).
FJ_DEVICE int fragment_col(int group, int pair, int lane) {
  return group * 8 + lane % 4 * 2 + pair;
}

template <int Rows, int Cols>
FJ_DEVICE void fill(acc_tile<Rows, Cols>& tile, float value) {
#pragma unroll
  for (int s = 0; s < tile.kSlabs; ++s)
#pragma unroll
    for (int g = 0; g < tile.kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) tile.frag[s][g][e] = value;
}

template <int Rows>
FJ_DEVICE void fill(row_vec<Rows>& rows, float value) {
#pragma unroll
  for (int r = 0; r < Rows / 16 * 2; ++r) rows.v[r] = value;
}

/// Calls f(row, col, value&) for each of this lane's elements (tile coordinates). Element e of
/// a fragment is in half e / 2, column pair e % 2; its row slot in a row_vec is 2·slab + half.
template <int Rows, int Cols, typename F>
FJ_DEVICE void for_each_element(acc_tile<Rows, Cols>& tile, int lane, F f) {
#pragma unroll
  for (int s = 0; s < tile.kSlabs; ++s)
#pragma unroll
    for (int g = 0; g < tile.kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        f(fragment_row(s, e / 2, lane), fragment_col(g, e % 2, lane), tile.frag[s][g][e]);
      }
}

/// Calls f(slot) for each of this lane's elements of a (Rows, Cols) tile (ElementSlot: where it
/// is), for work on several tiles of that shape element by element.
template <int Rows, int Cols, typename F>
FJ_DEVICE void for_each_slot(int lane, F f) {
#pragma unroll
  for (int s = 0; s < Rows / 16; ++s)
#pragma unroll
    for (int g = 0; g < Cols / 8; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        f(ElementSlot{fragment_row(s, e / 2, lane), fragment_col(g, e % 2, lane), s, g, e});
      }
}

/// Calls f(row_slot, value) for each element (a reference; const for a const tile), with its
/// row's slot in a row_vec.
template <typename Tile, typename F>
FJ_DEVICE void for_each_in_row(Tile& tile, F f) {
#pragma unroll
  for (int s = 0; s < tile.kSlabs; ++s)
#pragma unroll
    for (int g = 0; g < tile.kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) f(2 * s + e / 2, tile.frag[s][g][e]);
}

/// rows[r] = max(rows[r], max over the row's columns), across the quad sharing the row.
template <int Rows, int Cols>
FJ_DEVICE void row_max(const acc_tile<Rows, Cols>& tile, row_vec<Rows>& rows) {
  for_each_in_row(tile, [&](int r, float x) { rows.v[r] = max_float(rows.v[r], x); });
#pragma unroll
  for (int r = 0; r < Rows / 16 * 2; ++r) {
#pragma unroll
    for (int lane_mask = 1; lane_mask < 4; lane_mask *= 2) {
      rows.v[r] = max_float(rows.v[r], shuffle_xor(rows.v[r], lane_mask));
    }
  }
}

/// rows[r] += the sum of this lane's values of row r (a partial: see quad_sum).
template <int Rows, int Cols>
FJ_DEVICE void add_row_sum(const acc_tile<Rows, Cols>& tile, row_vec<Rows>& rows) {
  for_each_in_row(tile, [&](int r, float x) { rows.v[r] += x; });
}

/// Completes per-lane partial row sums: the sum over the quad that shares each row.
template <int Rows>
FJ_DEVICE void quad_sum(row_vec<Rows>& rows) {
#pragma unroll
  for (int r = 0; r < Rows / 16 * 2; ++r) {
#pragma unroll
    for (int lane_mask = 1; lane_mask < 4; lane_mask *= 2)
      rows.v[r] += shuffle_xor(rows.v[r], lane_mask);
  }
}

/// tile[r, :] *= factor[r]
template <int Rows, int Cols>
FJ_DEVICE void mul_row(acc_tile<Rows, Cols>& tile, const row_vec<Rows>& factor) {
  for_each_in_row(tile, [&](int r, float& x) { x *= factor.v[r]; });
}

/// tile[r, :] = 2^(tile[r, :] − base[r])
template <int Rows, int Cols>
FJ_DEVICE void exp2_sub_row(acc_tile<Rows, Cols>& tile, const row_vec<Rows>& base) {
  for_each_in_row(tile, [&](int r, float& x) { x = exp2_approx(x - base.v[r]); });
}

/// tile[r, :] = 2^((tile[r, :] − base[r])·factor): the difference before the product, so it is
/// exact near base[r] whatever the magnitude of the values (see forward_softmax.cuh).
template <int Rows, int Cols>
FJ_DEVICE void exp2_scaled_difference_row(acc_tile<Rows, Cols>& tile, const row_vec<Rows>& base,
                                          float factor) {
  for_each_in_row(tile, [&](int r, float& x) { x = exp2_approx((x - base.v[r]) * factor); });
}

/// tile[r, c] = 2^((tile[r, c] − base[r])·factor + offset): the same, times 2^offset (one
/// FFMA in place of the multiply).
template <int Rows, int Cols>
FJ_DEVICE void exp2_scaled_difference_row(acc_tile<Rows, Cols>& tile, const row_vec<Rows>& base,
                                          float factor, float offset) {
  for_each_in_row(tile,
                  [&](int r, float& x) { x = exp2_approx((x - base.v[r]) * factor + offset); });
}

/// tile[r, :] −= value[r]
template <int Rows, int Cols>
FJ_DEVICE void sub_row(acc_tile<Rows, Cols>& tile, const row_vec<Rows>& value) {
  for_each_in_row(tile, [&](int r, float& x) { x -= value.v[r]; });
}

/// Calls f(group, pair, value&) for each element, with its column's slot in a col_vec
/// (v[group][pair]).
template <int Rows, int Cols, typename F>
FJ_DEVICE void for_each_in_col(acc_tile<Rows, Cols>& tile, F f) {
#pragma unroll
  for (int s = 0; s < tile.kSlabs; ++s)
#pragma unroll
    for (int g = 0; g < tile.kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) f(g, e % 2, tile.frag[s][g][e]);
}

/// tile[:, c] = 2^(tile[:, c] − base[c])
template <int Rows, int Cols>
FJ_DEVICE void exp2_sub_col(acc_tile<Rows, Cols>& tile, const col_vec<Cols>& base) {
  for_each_in_col(tile, [&](int g, int pair, float& x) { x = exp2_approx(x - base.v[g][pair]); });
}

/// tile[:, c] −= value[c]
template <int Rows, int Cols>
FJ_DEVICE void sub_col(acc_tile<Rows, Cols>& tile, const col_vec<Cols>& value) {
  for_each_in_col(tile, [&](int g, int pair, float& x) { x -= value.v[g][pair]; });
}

/// tile *= factor, element by element
template <int Rows, int Cols>
FJ_DEVICE void mul_elements(acc_tile<Rows, Cols>& tile, const acc_tile<Rows, Cols>& factor) {
#pragma unroll
  for (int s = 0; s < tile.kSlabs; ++s)
#pragma unroll
    for (int g = 0; g < tile.kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 4; ++e) tile.frag[s][g][e] *= factor.frag[s][g][e];
}

/// tile *= factor
template <int Rows, int Cols>
FJ_DEVICE void scale_tile(acc_tile<Rows, Cols>& tile, float factor) {
  for_each_in_row(tile, [&](int, float& x) { x *= factor; });
}

}  // namespace flashjit
