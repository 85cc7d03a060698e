#pragma once
// The element-wise part of multi-scale attention's backward, recomputed block by block from the
// forward's r and δ = rowsum(dO ∘ O). With A = scale · (Q Kᵀ) ∘ M, d = max(r, 1) and O = A V / d:
//   dV = (A / d)ᵀ dO,
//   dA = (dO Vᵀ − [r > 1] · δ · sign(A)) / d      (the normalizer's term: ∂d/∂A = [r > 1]·sign(A)),
//   d(Q Kᵀ) = scale · dA ∘ M,   dM = dA ∘ scale · Q Kᵀ (a mask tensor's gradient).
// (The source document's appendix B.2 keeps only the normalizer's term of dS; the dO Vᵀ / d term
// of the product rule is there too, as finite differences confirm.) sign(0) is +1, as there.
#include "multiscale/multiscale_mask.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

/// What one query row contributes to the gradients: 1/d, and δ where r > 1 (else 0: the
/// normalizer is the constant 1 there). Rows past the block's valid ones get 0 and 0, so their
/// scores weigh nothing.
struct MultiScaleRowStats {
  float inverse;  // 1 / max(r, 1)
  float excess;   // [r > 1] · δ

  FJ_DEVICE static MultiScaleRowStats load(const AttentionBackwardParams& p, int batch, int head,
                                           int row) {
    const index_t at = (index_t(batch) * p.heads_q + head) * p.seqlen_q + row;
    const float r = load_global(p.lse + batch * p.lse_batch_stride + head * p.lse_head_stride, row);
    return {1.0f / (r > 1.0f ? r : 1.0f), r > 1.0f ? load_global(p.delta, at) : 0.0f};
  }
};

/// For one score: a = s · m (s = scale · q·k, m the mask), returns dA from dP = dO·v, and puts
/// the gradient of q·k in `dp`'s place.
FJ_DEVICE float multiscale_score_gradient(float s, float m, float& dp, MultiScaleRowStats row,
                                          float scale) {
  const float a = s * m;
  const float da = row.inverse * (dp - row.excess * (a < 0.0f ? -1.0f : 1.0f));
  dp = da * m * scale;
  return da;
}

}  // namespace flashjit
