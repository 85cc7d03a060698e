#pragma once
// The attention problem a forward (and later backward) call solves, and helpers to describe its
// tensors. Tensors are always viewed as [batch, seqlen, heads, head_dim]; the memory layout
// ([B, L, H, D] or [B, H, L, D], padded or not) is carried by the strides.
#include <cstdint>
#include <optional>

#include "flashjit/tensor.hpp"

namespace flashjit {

/// Shape and options of one attention call: O = softmax(scale · Q Kᵀ + mask) V per head.
/// batch, seqlen_q and seqlen_k may be 0, as in PyTorch: a call with nothing to write succeeds
/// and launches nothing; with seqlen_k 0 every query row sees no key (O = 0, LSE = -inf, dQ = 0),
/// with seqlen_q 0 no key is seen (dK = dV = 0). Empty tensors may have null data.
struct Attention {
  std::int64_t batch = 1;
  std::int64_t heads_q = 1;   ///< query heads
  std::int64_t heads_kv = 1;  ///< key/value heads; heads_q must be a multiple (GQA/MQA)
  std::int64_t seqlen_q = 1;
  std::int64_t seqlen_k = 1;
  std::int64_t head_dim = 64;  ///< a multiple of 8 from 8 to 256
  /// Key j is visible to query i only if j <= i + seqlen_k - seqlen_q (bottom-right aligned).
  /// Causal is the window_right = 0 case; combining it with window_right > 0 is an error.
  bool causal = false;
  /// Sliding window: keys more than window_left before (window_right after) the diagonal
  /// i + seqlen_k - seqlen_q are masked; -1 means unbounded on that side.
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  /// The softmax scale; 1/sqrt(head_dim) when unset.
  std::optional<float> scale{};
  /// Tanh soft-capping of the scores, s = softcap · tanh(s / softcap); 0 turns it off.
  float softcap = 0.0f;
  /// Backward only. false (the default, as in FlashAttention-2/3): dQ is summed with atomic adds
  /// in an fp32 workspace by the kernel that computes dK and dV, five matrix products per block
  /// pair; the order of those additions varies between runs, so dQ's last bits may too. true: a
  /// separate dQ kernel without atomics (seven products), the same bits on every run.
  bool deterministic = false;
};

/// How a [batch, seqlen, heads, head_dim] tensor is laid out in memory.
enum class Layout {
  bshd,  ///< [batch, seqlen, heads, head_dim], contiguous (FlashAttention's layout)
  bhsd,  ///< [batch, heads, seqlen, head_dim], contiguous (PyTorch SDPA's layout)
};

/// A contiguous tensor of logical shape [batch, seqlen, heads, head_dim] stored in `layout`.
/// Sizes may be 0 (an empty tensor); a negative one throws InvalidArgument naming it.
TensorView attention_tensor(void* data, DType dtype, Layout layout, std::int64_t batch,
                            std::int64_t seqlen, std::int64_t heads, std::int64_t head_dim);

/// The fp32 log-sum-exp tensor [batch, heads_q, seqlen_q], contiguous, for `attention`.
TensorView lse_tensor(float* data, const Attention& attention);

}  // namespace flashjit
