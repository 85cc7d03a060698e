#pragma once
// The float64 reference of multi-scale attention (retention), the source document's section
// 4.4, textbook math per query row: S = scale · (Q Kᵀ) ∘ M, r = rowsum(|S|), d = max(r, 1),
// O = S V / d; and its gradients by the chain rule (appendix B.2 with the product rule's
// dO Vᵀ / d term): dA = (dO Vᵀ − [r > 1] · δ · sign(S)) / d, δ = rowsum(dO ∘ O). Tensors as
// attention_reference.hpp's: [batch, seqlen, heads, head_dim] views, r [batch, heads_q, seqlen_q].
#include <cstdint>
#include <functional>
#include <vector>

#include "reference/tensor4.hpp"

namespace flashjit::reference {

/// One multi-scale problem. The mask is the decay γ_h^(n − m) for m <= n (n = i + seqlen_k −
/// seqlen_q), else 0, with `gammas` [heads_q]; or `mask` [heads_q, seqlen_q, seqlen_k].
struct MultiScaleProblem {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_k = 1, head_dim = 8;
  double scale = 1.0;
  bool decay = true;
  std::vector<double> gammas;  ///< decay: one rate per query head
  std::vector<double> mask;    ///< tensor: [heads_q, seqlen_q, seqlen_k], row-major

  std::int64_t kv_head(std::int64_t h) const { return h / (heads_q / heads_kv); }
  /// M[h, i, j].
  double mask_at(std::int64_t h, std::int64_t i, std::int64_t j) const;
};

/// Rounds an intermediate value (identity for the exact reference; to a 16-bit dtype for the
/// "plain computation in the input dtype" a kernel's error is judged against).
using Rounding = std::function<double(double)>;

struct MultiScaleOutputs {
  Tensor4 out;                 ///< O, [batch, seqlen_q, heads_q, head_dim]
  std::vector<double> rowsum;  ///< r, [batch, heads_q, seqlen_q]
};

/// O and r. With `round`, S, S / d and O are each rounded (sums exact).
MultiScaleOutputs multiscale_forward(const MultiScaleProblem& p, ConstView4 q, ConstView4 k,
                                     ConstView4 v, const Rounding& round = {});

struct MultiScaleGradients {
  Tensor4 dq, dk, dv;         ///< like q, k, v
  std::vector<double> dmask;  ///< [heads_q, seqlen_q, seqlen_k], summed over the batch
};

/// dQ, dK, dV (dK and dV summed over the query heads sharing a key/value head) and dM for the
/// loss Σ dout ∘ O, recomputing the forward. With `round`, O, dP, dA and the gradients are
/// rounded as a plain computation would round them.
MultiScaleGradients multiscale_backward(const MultiScaleProblem& p, ConstView4 q, ConstView4 k,
                                        ConstView4 v, ConstView4 dout, const Rounding& round = {});

}  // namespace flashjit::reference
