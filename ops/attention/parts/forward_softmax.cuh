#pragma once
// The online softmax of the forward pass on a warp's score tiles (docs/design.md), in the
// base-2 domain: the statistics are kept on the raw scores and the scale·log2(e) the host
// computed is applied inside the exponent, P = 2^((s − m)·c), the difference taken first. The
// one-FMA form s·c − m·c would round m·c, an error that grows with the scores and multiplies
// every P of the row: past scaled scores of about 1e8, P overflows fp16, then fp32 (LSE ±inf,
// O NaN). Taken first, s − m is exact near the maximum, the maximum's P is exactly 1, and no
// P exceeds 1 at any scale. Soft-capped scores arrive already scaled (c = 1): the cap's tanh
// needs them scaled first.
#include "attention/parts/forward_params.cuh"
#include "tile/online_softmax.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

/// With soft-capping, S = c·log2(e) · tanh(S · scale / c) (`softcap_log2` c·log2(e), `scale`
/// over c); without, S stays raw (the softmax scales it in its exponent).
template <bool Softcap, int Rows, int Cols>
FJ_DEVICE void cap_scores(acc_tile<Rows, Cols>& s, float softcap_log2, float scale) {
  if constexpr (Softcap) {
    for_each_in_row(s, [&](int, float& x) { x = softcap_log2 * tanh_approx(x * scale); });
  }
}

/// cap_scores with the call's factors.
template <bool Softcap, int Rows, int Cols>
FJ_DEVICE void cap_scores(acc_tile<Rows, Cols>& s, const AttentionForwardParams& params) {
  cap_scores<Softcap>(s, params.softcap_log2, params.score_scale);
}

/// The factor between a score as the kernel holds it and its base-2 exponent: scale·log2(e),
/// or 1 for soft-capped scores (cap_scores scaled them).
template <bool Softcap>
FJ_DEVICE float exponent_scale(const AttentionForwardParams& params) {
  return Softcap ? 1.0f : params.score_scale;
}

/// The base a row's exponents subtract: its running max m', or 0 for a row that has seen only
/// masked keys (m' = −inf), where subtracting it would give −inf − (−inf) = NaN; any finite
/// base keeps that row's P = 2^(−inf) = 0 and its α = 0.
FJ_DEVICE float exponent_base(float max) { return max == negative_infinity() ? 0.0f : max; }

/// A finished row's natural-log LSE = (m·c + log2 ℓ)·ln 2 from its max m, whole sum ℓ and
/// exponent scale c; −inf for a row that saw no visible key.
FJ_DEVICE float finished_lse(float max, float sum, float scale) {
  return sum > 0.0f ? (max * scale + log2_approx(sum)) * kLn2 : negative_infinity();
}

/// The running statistics of a warp's query rows. With Offset > 0 every P is 2^Offset times the
/// softmax's (ℓ too, so O / ℓ is unchanged; the LSE takes it out): FlashAttention-3's shift of
/// P ∈ [0, 1] into [0, 2^8] before it is rounded to e4m3, whose normal range then holds
/// probabilities down to 2^−14 instead of 2^−6 (below, e4m3 has at most two significant bits).
template <int Rows, int Offset = 0>
struct OnlineSoftmax {
  row_vec<Rows> max;  // m: the largest score seen per row (−inf before any visible key)
  row_vec<Rows> sum;  // ℓ: Σ 2^((s − m)·c), this lane's columns only until finish()

  FJ_DEVICE OnlineSoftmax() {
    fill(max, negative_infinity());
    fill(sum, 0.0f);
  }

  /// Folds one block of scores in: `s` becomes P = 2^((S − m')·c); returns α = 2^((m − m')·c),
  /// the factor that takes an output accumulated so far to the new maximum m'. `scale` is c
  /// (exponent_scale), passed per call rather than kept: read from the kernel's parameters
  /// where it is used, it takes no register across the loop.
  template <int Cols>
  FJ_DEVICE row_vec<Rows> fold(acc_tile<Rows, Cols>& s, float scale) {
    row_vec<Rows> new_max = max;
    row_max(s, new_max);  // m' = max(m, rowmax(S))
    return fold_to(s, new_max, scale);
  }

  /// fold with the new maximum m' given: the largest over the block's scores of the row, where
  /// several warps hold parts of it (attention/wide/wide_forward_kernel.cuh), so they all scale by
  /// the same α.
  template <int Cols>
  FJ_DEVICE row_vec<Rows> fold_to(acc_tile<Rows, Cols>& s, const row_vec<Rows>& new_max,
                                  float scale) {
    row_vec<Rows> base, alpha;
#pragma unroll
    for (int r = 0; r < Rows / 16 * 2; ++r) {
      base.v[r] = exponent_base(new_max.v[r]);
      alpha.v[r] = exp2_approx((max.v[r] - base.v[r]) * scale);  // α = 2^((m − m')·c)
      sum.v[r] *= alpha.v[r];
    }
    if constexpr (Offset == 0) {
      exp2_scaled_difference_row(s, base, scale);  // P = 2^((S − m')·c)
    } else {
      exp2_scaled_difference_row(s, base, scale, float(Offset));  // P = 2^((S − m')·c + Offset)
    }
    add_row_sum(s, sum);  // ℓ' = α·ℓ + rowsum(P)
    max = new_max;
    return alpha;
  }

  /// fold, then O' = α·O: `s` becomes P and `o` is rescaled to m'.
  template <int Cols, int HeadDim>
  FJ_DEVICE void update(acc_tile<Rows, Cols>& s, acc_tile<Rows, HeadDim>& o, float scale) {
    mul_row(o, fold(s, scale));
  }

  /// O /= ℓ and returns each row's natural-log LSE = (m·c + log2 ℓ)·ln 2. A row that saw no
  /// visible key gets O = 0 and LSE = −inf.
  template <int HeadDim>
  FJ_DEVICE row_vec<Rows> finish(acc_tile<Rows, HeadDim>& o, float scale) {
    quad_sum(sum);
    return finish_summed(o, scale);
  }

  /// finish with `sum` already each row's whole ℓ (on every lane of the quad).
  template <int HeadDim>
  FJ_DEVICE row_vec<Rows> finish_summed(acc_tile<Rows, HeadDim>& o, float scale) {
    row_vec<Rows> inverse, lse;
#pragma unroll
    for (int r = 0; r < Rows / 16 * 2; ++r) {
      inverse.v[r] = inverse_sum(sum.v[r]);
      lse.v[r] = finished_lse(max.v[r], sum.v[r] * (1.0f / float(1 << Offset)), scale);
    }
    mul_row(o, inverse);
    return lse;
  }
};

}  // namespace flashjit
