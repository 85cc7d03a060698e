#pragma once
// What both backward kernels recompute from the forward pass, element by element: the base-2
// scores (with the softcap's slope kept for the chain rule), P = 2^(S − LSE), and
// dS = P ∘ (dP − D).
#include "attention/parts/backward_params.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

/// LSE in base 2 for P = 2^(S − LSE); a row that saw no key (LSE = −inf) gets +inf, so its P
/// is 2^(−inf) = 0 rather than 2^(−inf + inf) = NaN.
FJ_DEVICE float lse_base2(float lse) {
  return lse == negative_infinity() ? -negative_infinity() : lse * kLog2e;
}

/// Scales raw dot products into base-2 scores. With softcap s = c·tanh(x·scale / c), whose
/// slope ds/dx = scale·(1 − tanh²) the chain rule needs later: kept per score.
template <bool Softcap, int Rows, int Cols>
struct ScoreScaling {
  acc_tile<Rows, Cols> slope;  // 1 − tanh², the scale factored out

  FJ_DEVICE void scale(acc_tile<Rows, Cols>& s, const AttentionBackwardParams& p) {
#pragma unroll
    for (int i = 0; i < s.kSlabs; ++i)
#pragma unroll
      for (int g = 0; g < s.kGroups; ++g)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float t = tanh_approx(s.frag[i][g][e] * p.score_scale);
          slope.frag[i][g][e] = 1.0f - t * t;
          s.frag[i][g][e] = p.softcap_log2 * t;
        }
  }
  /// dS of the raw dot products from dS of the capped scores.
  FJ_DEVICE void chain(acc_tile<Rows, Cols>& ds) const { mul_elements(ds, slope); }
};

template <int Rows, int Cols>
struct ScoreScaling<false, Rows, Cols> {
  FJ_DEVICE void scale(acc_tile<Rows, Cols>& s, const AttentionBackwardParams& p) {
    scale_tile(s, p.score_scale);
  }
  FJ_DEVICE void chain(acc_tile<Rows, Cols>&) const {}
};

}  // namespace flashjit
