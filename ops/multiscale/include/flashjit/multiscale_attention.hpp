#pragma once
// Multi-scale attention (retention), the source document's section 4.4: per head
//   S = scale · (Q Kᵀ) ∘ M,   r = rowsum(|S|),   O = (S V) / max(r, 1),
// with M a decay mask generated in the kernel or a tensor. No softmax: S is used as it is,
// normalized by the absolute row sum where that exceeds 1.
#include <cstdint>

#include "flashjit/tensor.hpp"

namespace flashjit {

/// Which mask M a multi-scale attention call applies.
enum class MultiScaleMask {
  /// M[n, m] = γ_h^(n − m) for n >= m, else 0: causal with one decay rate γ_h per query head,
  /// generated in the kernel (no L × L tensor is read). The mask tensor is fp32 [heads_q], each
  /// γ in [0, 1] (0 keeps the diagonal only). The rates are device data and not checked: a
  /// γ above 1 grows with the distance and can overflow. n is the query's position among the
  /// keys, i + seqlen_k − seqlen_q (bottom-right aligned, as attention's causal mask).
  decay,
  /// M given as an fp32 tensor [heads_q, seqlen_q, seqlen_k] with unit last stride (any
  /// values, shared by the batch).
  tensor,
};

/// Shape and options of one multi-scale attention call. Sizes as Attention's: q is [batch,
/// seqlen_q, heads_q, head_dim], k and v [batch, seqlen_k, heads_kv, head_dim] (heads_q a
/// multiple of heads_kv: GQA/MQA), o like q; fp16 or bf16; any strides with a unit head_dim
/// stride. batch, seqlen_q and seqlen_k may be 0 (nothing to compute; a row with no key gets
/// O = 0 and r = 0).
struct MultiScaleAttention {
  std::int64_t batch = 1;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;
  std::int64_t seqlen_q = 1;
  std::int64_t seqlen_k = 1;
  std::int64_t head_dim = 64;  ///< a multiple of 8 from 8 to 256
  /// The factor of Q Kᵀ; 0 means 1/sqrt(head_dim) (RetNet scales K by it).
  float scale = 0.0f;
  MultiScaleMask mask = MultiScaleMask::decay;
};

/// The fp32 row sums r = rowsum(|S|) [batch, heads_q, seqlen_q], contiguous, that the forward
/// writes for the backward.
TensorView multiscale_rowsum_tensor(float* data, const MultiScaleAttention& attention);

/// The mask argument of `attention`: the decay rates [heads_q] or the tensor [heads_q,
/// seqlen_q, seqlen_k], fp32, contiguous.
TensorView multiscale_mask_tensor(float* data, const MultiScaleAttention& attention);

}  // namespace flashjit
