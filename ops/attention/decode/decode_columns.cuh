#pragma once
// The decode kernel's products and softmax with the packed (query, head) rows in the tensor
// core tile's small dimension: Sᵀ = K Qᵀ, whose mma rows are a chunk's 16 keys and whose 8
// columns are query rows, and Oᵀ += Vᵀ Pᵀ, whose mma rows are 16 of V's columns. A GQA group
// of 8 (one query token) then fills the tile exactly, where S = Q Kᵀ spent half of every mma
// on padding rows (docs/inference.md, "The decode kernel"). The softmax runs down the columns
// of Sᵀ, and Pᵀ's C fragments are dealt into B fragments by two shuffles (below).
#include "attention/parts/forward_softmax.cuh"
#include "tile/gemm.cuh"
#include "tile/memory.cuh"
#include "tile/register_tile.cuh"
#include "tile/warp.cuh"

namespace flashjit {

/// The B fragment of rows [row0, row0 + 8), columns [col0, col0 + 16) of a row-major shared
/// tile (the B of X Yᵀ where the tile holds Y): lane (g, t) reads row g's columns 2t, 2t + 1
/// and 2t + 8, 2t + 9, one 32-bit word each.
template <typename T, int Rows, int Cols>
FJ_DEVICE FragmentB load_b_rows(smem_tile<T, Rows, Cols> tile, int row0, int col0, int lane) {
  const auto* words =
      reinterpret_cast<const unsigned*>(tile.at(row0 + lane / 4, col0 + lane % 4 * 2));
  return {{load_shared(words, 0), load_shared(words, 4)}};
}

/// s_t += K Qᵀ: K the first Keys rows of a shared tile (all its K columns), Q's B fragments
/// `q(group, step)` for each 8-row group and 16-column step.
template <typename T, int K, int Keys, int Rows, int TileRows, int TileCols, typename QueryB>
FJ_DEVICE void add_scores_transposed(acc_tile<Keys, Rows>& s_t, smem_tile<T, TileRows, TileCols> k,
                                     QueryB q, int lane) {
  using Tile = acc_tile<Keys, Rows>;
#pragma unroll
  for (int step = 0; step < K / 16; ++step) {
#pragma unroll
    for (int slab = 0; slab < Tile::kSlabs; ++slab) {
      const FragmentA a = load_a(k, slab * 16, step * 16, lane);
#pragma unroll
      for (int group = 0; group < Tile::kGroups; ++group) {
        mma_m16n8k16<T>(s_t.frag[slab][group], a, q(group, step), s_t.frag[slab][group]);
      }
    }
  }
}

/// Pᵀ (keys × rows, C fragments) rounded to T as the B operands of Oᵀ += Vᵀ Pᵀ, one per
/// 16-key slab and 8-row group. Lane (g, t) needs P at (key 2t and 2t + 1, row g) and (keys
/// 2t + 8, 2t + 9, row g), which lanes A = 8t + g / 2 and B = A + 4 hold (element g % 2, and
/// g % 2 + 2 for the upper keys). Each lane packs its elements of the even and the odd row
/// (w0, w1: the lower key in the low half); in the first shuffle lanes of type A (lane % 8 < 4)
/// offer w0 and the others w1, in the second the other one, so the even rows' lanes take their
/// A word from the first and their B word from the second, the odd rows' the other way round.
template <typename T, int Keys, int Rows>
struct ProbabilitiesB {
  FragmentB frag[Keys / 16][Rows / 8];

  FJ_DEVICE ProbabilitiesB(const acc_tile<Keys, Rows>& p, int lane) {
    const int g = lane / 4, t = lane % 4;
    const bool offers_a = lane % 8 < 4, even_row = g % 2 == 0;
    const int lane_a = 8 * t + g / 2, lane_b = lane_a + 4;
#pragma unroll
    for (int slab = 0; slab < Keys / 16; ++slab)
#pragma unroll
      for (int group = 0; group < Rows / 8; ++group) {
        const float(&c)[4] = p.frag[slab][group];
        const unsigned w0 = pack2<T>(c[0], c[2]), w1 = pack2<T>(c[1], c[3]);
        const unsigned first = shuffle_word(offers_a ? w0 : w1, even_row ? lane_a : lane_b);
        const unsigned second = shuffle_word(offers_a ? w1 : w0, even_row ? lane_b : lane_a);
        const unsigned from_a = even_row ? first : second;
        const unsigned from_b = even_row ? second : first;
        frag[slab][group] = {
            {(from_a & 0xffffu) | (from_b << 16), (from_a >> 16) | (from_b & 0xffff0000u)}};
      }
  }

 private:
  FJ_DEVICE static unsigned shuffle_word(unsigned word, int src_lane) {
    return unsigned(shuffle_from(int(word), src_lane));
  }
};

/// o_t += Vᵀ Pᵀ: V the first Keys rows of a shared tile (its first Dims columns).
template <typename T, int Dims, int Rows, int Keys, int TileRows, int TileCols>
FJ_DEVICE void add_values_transposed(acc_tile<Dims, Rows>& o_t,
                                     const ProbabilitiesB<T, Keys, Rows>& p,
                                     smem_tile<T, TileRows, TileCols> v, int lane) {
#pragma unroll
  for (int slab = 0; slab < Dims / 16; ++slab)
#pragma unroll
    for (int key_slab = 0; key_slab < Keys / 16; ++key_slab) {
      const FragmentA a = load_a_transposed(v, slab * 16, key_slab * 16, lane);
#pragma unroll
      for (int group = 0; group < Rows / 8; ++group) {
        mma_m16n8k16<T>(o_t.frag[slab][group], a, p.frag[key_slab][group], o_t.frag[slab][group]);
      }
    }
}

/// cols[c] combined over the 8 lanes that share column c (lane / 4 differs: lane masks 4, 8,
/// 16) with `combine`.
template <int Cols, typename Combine>
FJ_DEVICE void across_column_lanes(col_vec<Cols>& cols, Combine combine) {
#pragma unroll
  for (int group = 0; group < Cols / 8; ++group)
#pragma unroll
    for (int pair = 0; pair < 2; ++pair)
#pragma unroll
      for (int lane_mask = 4; lane_mask < kWarpSize; lane_mask *= 2) {
        float& x = cols.v[group][pair];
        x = combine(x, shuffle_xor(x, lane_mask));
      }
}

template <int Cols>
FJ_DEVICE void fill(col_vec<Cols>& cols, float value) {
#pragma unroll
  for (int group = 0; group < Cols / 8; ++group) cols.v[group][0] = cols.v[group][1] = value;
}

/// The online softmax of a warp's query rows held as columns (Sᵀ's), as OnlineSoftmax
/// (parts/forward_softmax.cuh, whose per-row arithmetic it shares) is for rows: m and ℓ per
/// column, in base 2.
template <int Cols>
struct ColumnSoftmax {
  col_vec<Cols> max;  // m: the largest score seen per column (−inf before any visible key)
  col_vec<Cols> sum;  // ℓ: Σ 2^((s − m)·c), this lane's keys only until finish()

  FJ_DEVICE ColumnSoftmax() {
    fill(max, negative_infinity());
    fill(sum, 0.0f);
  }

  /// s_t becomes Pᵀ = 2^((Sᵀ − m')·c) and o_t (Oᵀ) is rescaled by α = 2^((m − m')·c).
  template <int Keys, int Dims>
  FJ_DEVICE void update(acc_tile<Keys, Cols>& s_t, acc_tile<Dims, Cols>& o_t, float scale) {
    col_vec<Cols> new_max = max, base, alpha;
    for_each_in_col(s_t, [&](int g, int pair, float& x) {
      new_max.v[g][pair] = max_float(new_max.v[g][pair], x);
    });
    across_column_lanes(new_max, [](float a, float b) { return max_float(a, b); });
#pragma unroll
    for (int g = 0; g < Cols / 8; ++g)
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        base.v[g][pair] = exponent_base(new_max.v[g][pair]);
        alpha.v[g][pair] = exp2_approx((max.v[g][pair] - base.v[g][pair]) * scale);
        sum.v[g][pair] *= alpha.v[g][pair];
      }
    for_each_in_col(s_t, [&](int g, int pair, float& x) {
      x = exp2_approx((x - base.v[g][pair]) * scale);
      sum.v[g][pair] += x;
    });
    for_each_in_col(o_t, [&](int g, int pair, float& x) { x *= alpha.v[g][pair]; });
    max = new_max;
  }

  /// Oᵀ /= ℓ; returns each column's natural-log LSE (O 0 and LSE −inf where no key was seen).
  template <int Dims>
  FJ_DEVICE col_vec<Cols> finish(acc_tile<Dims, Cols>& o_t, float scale) {
    across_column_lanes(sum, [](float a, float b) { return a + b; });
    col_vec<Cols> inverse, lse;
#pragma unroll
    for (int g = 0; g < Cols / 8; ++g)
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        inverse.v[g][pair] = inverse_sum(sum.v[g][pair]);
        lse.v[g][pair] = finished_lse(max.v[g][pair], sum.v[g][pair], scale);
      }
    for_each_in_col(o_t, [&](int g, int pair, float& x) { x *= inverse.v[g][pair]; });
    return lse;
  }
};

}  // namespace flashjit
