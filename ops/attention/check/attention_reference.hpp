// The float64 CPU reference that every attention kernel is checked against.
//
// Textbook math, no tiling, no online softmax: each query row's scores are materialized, the
// softmax is taken with the row max subtracted, and the backward pass follows the derivation
// in docs/design.md. Slow on purpose; clarity is the point. Sizes are small in tests.
//
// Conventions (the same as FlashAttention's):
// - Q, O, dO, dQ are [batch, seqlen_q, heads_q, head_dim]; K, V, dK, dV are
//   [batch, seqlen_k, heads_kv, head_dim], always indexed in that logical order. Memory order
//   is given by the strides, so [B, L, H, D] and [B, H, L, D] buffers are both views.
// - LSE is [batch, heads_q, seqlen_q], contiguous, natural log.
// - A query row that sees no key has O = 0 and LSE = -inf, and contributes no gradient.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "reference/row_softmax.hpp"
#include "reference/tensor4.hpp"

namespace flashjit::reference {

/// One attention problem: sizes, scale and mask. Mirrors the library's `Attention` descriptor.
struct Problem {
  int64_t batch = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;  ///< divides heads_q: GQA, or MQA when 1
  int64_t seqlen_q = 1;
  int64_t seqlen_k = 1;
  int64_t head_dim = 1;                   ///< Q's and K's
  int64_t head_dim_v = 0;                 ///< V's and O's; 0: head_dim
  std::optional<double> softmax_scale{};  ///< 1/sqrt(head_dim) when not given
  bool causal = false;
  int64_t window_left = -1;   ///< keys left of the diagonal a query sees; -1 = unbounded
  int64_t window_right = -1;  ///< keys right of the diagonal a query sees; -1 = unbounded
  double softcap = 0.0;       ///< 0 = off; else s = softcap * tanh(scale * q.k / softcap)
  /// The library's Attention::score_mod and mask_mod: the text handed to the kernels, and the
  /// same expression as a host function of (score, b, h, q_idx, kv_idx) and (b, h, q_idx,
  /// kv_idx), which the reference evaluates in float64. Empty: none. The backward reference
  /// also needs `score_mod_slope`, ∂score_mod/∂score at the same arguments, written by hand (so
  /// that it checks the kernels' dual numbers rather than repeating them).
  std::string score_mod_text{};
  std::function<double(double, int64_t, int64_t, int64_t, int64_t)> score_mod{};
  std::function<double(double, int64_t, int64_t, int64_t, int64_t)> score_mod_slope{};
  std::string mask_mod_text{};
  std::function<bool(int64_t, int64_t, int64_t, int64_t)> mask_mod{};
  /// Learnable attention sinks (Attention::sinks): one logit per query head joining every
  /// row's softmax denominator (and its LSE), adding nothing to O. Empty: none.
  std::vector<double> sinks{};
  /// Dropout: the library's Attention::dropout_p, dropout_seed and dropout_offset, handed to
  /// the kernels, and `dropout`, the factor Z_ij that P_ij of (b, h, i, j) is multiplied by in
  /// O = (P ∘ Z) V (0 where dropped, 1 / (1 − p) where kept), which the caller regenerates on
  /// the host from the same generator (check/dropout_mask.hpp). Empty: none.
  double dropout_p = 0.0;
  uint64_t dropout_seed = 0;
  uint64_t dropout_offset = 0;
  std::function<double(int64_t, int64_t, int64_t, int64_t)> dropout{};

  /// Throws std::invalid_argument naming the first bad field.
  void validate() const;
  /// The softmax scale in effect.
  double scale() const;
  /// The key/value head read by query head `head_q`.
  int64_t kv_head(int64_t head_q) const { return head_q / (heads_q / heads_kv); }
  /// The one mask predicate: whether key `j` is visible to query `i`. Bottom-right aligned
  /// (the diagonal is j = i + seqlen_k - seqlen_q); causal is a right window of 0.
  bool visible(int64_t i, int64_t j) const;
  /// visible(i, j), and the mask modifier's verdict for (b, h, i, j) when there is one.
  bool sees(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return visible(i, j) && (!mask_mod || mask_mod(b, h, i, j));
  }
  /// The score modifier applied to the scaled (soft-capped) score `s` of (b, h, i, j), or `s`.
  double modified(double s, int64_t b, int64_t h, int64_t i, int64_t j) const {
    return score_mod ? score_mod(s, b, h, i, j) : s;
  }
  /// ∂modified/∂s at `s` (1 without a score modifier; score_mod_slope must be set with one).
  double modified_slope(double s, int64_t b, int64_t h, int64_t i, int64_t j) const {
    return score_mod ? score_mod_slope(s, b, h, i, j) : 1.0;
  }
  /// Whether any query sees key `j`: a key no query sees has exactly zero dK and dV.
  bool key_seen(int64_t j) const;
  /// V's and O's head dim: head_dim_v, or head_dim when it is 0.
  int64_t value_dim() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  /// {batch, seqlen_q, heads_q, head_dim}: shape of Q and dQ (and of O and dO at value_dim()).
  Shape4 q_shape() const { return {batch, seqlen_q, heads_q, head_dim}; }
  /// {batch, seqlen_k, heads_kv, head_dim}: shape of K and dK (and of V and dV at value_dim()).
  Shape4 kv_shape() const { return {batch, seqlen_k, heads_kv, head_dim}; }
  /// {batch, seqlen_q, heads_q, value_dim()}: shape of O and dO.
  Shape4 o_shape() const { return {batch, seqlen_q, heads_q, value_dim()}; }
  /// {batch, seqlen_k, heads_kv, value_dim()}: shape of V and dV.
  Shape4 v_shape() const { return {batch, seqlen_k, heads_kv, value_dim()}; }
};

/// A half-open range of key positions [begin, end); end = -1 means seqlen_k. Positions stay
/// absolute, so the mask of a partial result is the mask of the full problem.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = -1;
};

/// Output of a forward pass, or a partial one over a subset of keys.
struct ForwardResult {
  Tensor4 out;              ///< O, {batch, seqlen_q, heads_q, value dim}
  std::vector<double> lse;  ///< LSE, [batch, heads_q, seqlen_q] contiguous, natural log

  /// The LSE of query `i` of head `h` in batch `b`.
  double& lse_at(int64_t b, int64_t h, int64_t i) {
    return lse[static_cast<size_t>((b * out.shape[2] + h) * out.shape[1] + i)];
  }
  double lse_at(int64_t b, int64_t h, int64_t i) const {
    return lse[static_cast<size_t>((b * out.shape[2] + h) * out.shape[1] + i)];
  }
};

/// Gradients of a backward pass. dK and dV sum over every query head sharing a key head.
struct Gradients {
  Tensor4 dq;  ///< {batch, seqlen_q, heads_q, head_dim}
  Tensor4 dk;  ///< {batch, seqlen_k, heads_kv, head_dim}
  Tensor4 dv;  ///< {batch, seqlen_k, heads_kv, value dim}
};

/// O = softmax(scores) V and its LSE, over the keys in `keys` only (all keys by default).
/// Throws std::invalid_argument when the problem or a view's shape is invalid.
ForwardResult forward(const Problem& problem, ConstView4 q, ConstView4 k, ConstView4 v,
                      KeyRange keys = {}, Layout out_layout = Layout::bshd);

/// dQ, dK, dV of loss(O) given dO = dloss/dO. Recomputes O and LSE itself.
/// Throws std::invalid_argument when the problem or a view's shape is invalid.
Gradients backward(const Problem& problem, ConstView4 q, ConstView4 k, ConstView4 v,
                   ConstView4 dout, Layout grad_layout = Layout::bshd);

/// ∂loss/∂sinks (Attention::sinks_grad) for dO = dloss/dO: −Σ over batch and rows of
/// e^(s_h − LSE) · (dO_i · O_i), per query head. Recomputes O and LSE itself; the problem must
/// have sinks.
std::vector<double> sinks_gradient(const Problem& problem, ConstView4 q, ConstView4 k,
                                   ConstView4 v, ConstView4 dout);

/// log(e^a + e^b) computed stably; -inf when both are -inf.
double log_add_exp(double a, double b);

/// Exact merge of two partial results over disjoint key sets:
/// LSE = log(e^LSE1 + e^LSE2), O = e^(LSE1-LSE) O1 + e^(LSE2-LSE) O2. Rows empty in both
/// stay O = 0, LSE = -inf. The result is stored in `first`'s layout.
/// Throws std::invalid_argument when the two shapes differ.
ForwardResult combine(const ForwardResult& first, const ForwardResult& second);

/// Exact merge of N >= 1 partial results over disjoint key sets, the combiner applied N-way:
/// LSE = log Σᵢ e^LSEᵢ, O = Σᵢ e^(LSEᵢ − LSE) Oᵢ (natural log). Rows empty in every partial
/// stay O = 0, LSE = -inf. The result is stored in the first partial's layout.
/// Throws std::invalid_argument for no partials or shapes that differ.
ForwardResult merge_states(std::span<const ForwardResult> partials);

}  // namespace flashjit::reference
