#pragma once
// The forward kernel's run-time arguments, one struct shared by the host (which fills it) and
// the kernel (which takes it by value). Everything that varies per call and not per
// specialization lives here; what the kernel needs as a compile-time constant is in the config.
#include "attention/head_tensor.cuh"

namespace flashjit {

/// Arguments of flashjit::attention_forward_kernel. Query row i sees key j iff
///   j < seqlen_k  and  i + diagonal - window_left <= j <= i + diagonal + window_right
/// where diagonal = seqlen_k - seqlen_q aligns the mask to the bottom right (FlashAttention-2).
/// Causal is window_right = 0 with an unbounded left window; an unbounded side is kNoWindow.
struct AttentionForwardParams {
  static constexpr int kNoWindow = 1 << 30;

  HeadTensor q;  // (batch, seqlen_q, heads_q, head_dim)
  HeadTensor k;  // (batch, seqlen_k, heads_kv, head_dim)
  HeadTensor v;  // (batch, seqlen_k, heads_kv, head_dim)
  HeadTensor o;  // (batch, seqlen_q, heads_q, head_dim), written
  float* lse;    // (batch, heads_q, seqlen_q) natural-log LSE, written; nullptr: skipped
  index_t lse_batch_stride;
  index_t lse_head_stride;  // the row stride is 1

  int seqlen_q;
  int seqlen_k;
  int head_dim;      // the real head dim (the config's may be padded up to 16)
  int heads_per_kv;  // heads_q / heads_kv: query head h reads key/value head h / heads_per_kv
  int window_left;   // keys visible left of the diagonal, kNoWindow for all
  int window_right;  // keys visible right of the diagonal, kNoWindow for all

  // Scores in the base-2 domain, folded on the host: without softcap s2 = (q·k) · score_scale
  // with score_scale = scale · log2(e); with softcap c, s2 = softcap_log2 · tanh((q·k) ·
  // score_scale) with score_scale = scale / c and softcap_log2 = c · log2(e).
  float score_scale;
  float softcap_log2;
};

}  // namespace flashjit
