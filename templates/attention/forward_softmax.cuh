#pragma once
// The online softmax of the forward pass on a warp's score tiles (DESIGN.md section 1), in the
// base-2 domain: scores arrive multiplied by scale·log2(e) (folded on the host), so every
// exponential is one exp2.
#include "attention/forward_params.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

/// S = S · scale · log2(e), or with soft-capping S = c·log2(e) · tanh(S · scale / c).
template <bool Softcap, int Rows, int Cols>
FJ_DEVICE void scale_scores(acc_tile<Rows, Cols>& s, const AttentionForwardParams& params) {
  for_each_in_row(s, [&](int, float& x) {
    x = Softcap ? params.softcap_log2 * tanh_approx(x * params.score_scale)
                : x * params.score_scale;
  });
}

/// The running statistics of a warp's query rows.
template <int Rows>
struct OnlineSoftmax {
  row_vec<Rows> max;  // m: the largest score seen per row (−inf before any visible key)
  row_vec<Rows> sum;  // ℓ: Σ 2^(s − m), this lane's columns only until finish()

  FJ_DEVICE OnlineSoftmax() {
    fill(max, negative_infinity());
    fill(sum, 0.0f);
  }

  /// Folds one block of scores in: `s` becomes P = 2^(S − m') and `o` is rescaled to m'.
  template <int Cols, int HeadDim>
  FJ_DEVICE void update(acc_tile<Rows, Cols>& s, acc_tile<Rows, HeadDim>& o) {
    row_vec<Rows> new_max = max;
    row_max(s, new_max);  // m' = max(m, rowmax(S))
    row_vec<Rows> base, alpha;
#pragma unroll
    for (int r = 0; r < Rows / 16 * 2; ++r) {
      // A row that has seen only masked keys has m' = −inf; subtracting it would give
      // −inf − (−inf) = NaN. Any finite base keeps its P = 2^(−inf) = 0 and its α = 0.
      base.v[r] = new_max.v[r] == negative_infinity() ? 0.0f : new_max.v[r];
      alpha.v[r] = exp2_approx(max.v[r] - base.v[r]);  // α = 2^(m − m')
      sum.v[r] *= alpha.v[r];
    }
    exp2_sub_row(s, base);  // P = 2^(S − m')
    add_row_sum(s, sum);    // ℓ' = α·ℓ + rowsum(P)
    mul_row(o, alpha);      // O' = α·O
    max = new_max;
  }

  /// O /= ℓ and returns each row's natural-log LSE = (m + log2 ℓ)·ln 2. A row that saw no
  /// visible key gets O = 0 and LSE = −inf.
  template <int HeadDim>
  FJ_DEVICE row_vec<Rows> finish(acc_tile<Rows, HeadDim>& o) {
    quad_sum(sum);
    row_vec<Rows> inverse, lse;
#pragma unroll
    for (int r = 0; r < Rows / 16 * 2; ++r) {
      const bool seen = sum.v[r] > 0.0f;
      inverse.v[r] = seen ? 1.0f / sum.v[r] : 0.0f;
      lse.v[r] = seen ? (max.v[r] + log2_approx(sum.v[r])) * kLn2 : negative_infinity();
    }
    mul_row(o, inverse);
    return lse;
  }
};

}  // namespace flashjit
