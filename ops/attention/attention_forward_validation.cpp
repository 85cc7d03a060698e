// Argument validation of the attention forward op (docs/design.md, "Bad input"): every bad
// input is an InvalidArgument naming the argument and what is accepted, before anything is
// compiled or launched.
#include <cmath>
#include <cstdint>
#include <string>

#include "attention/attention_common.hpp"
#include "attention/attention_forward.hpp"
#include "attention/modifiers/block_mask.hpp"
#include "attention/modifiers/score_modifiers.hpp"
#include "attention/wide/wide_forward_space.cuh"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

namespace space = flashjit::attention_forward_space;

void check_size(std::int64_t value, const char* name, std::int64_t least, std::int64_t limit,
                const char* why) {
  if (value < least || value > limit) {
    throw InvalidArgument(name, "is " + std::to_string(value) + "; must be from " +
                                    std::to_string(least) + " to " + std::to_string(limit) + " (" +
                                    why + ")");
  }
}

void check_sizes(const Attention& attention, bool wide_head_dims) {
  // A batch or a sequence of length 0 is an empty problem, not an error (frameworks pass them).
  check_size(attention.batch, "attention.batch", 0, kMaxGridYZ, "the grid's z dimension");
  check_size(attention.heads_q, "attention.heads_q", 1, kMaxGridYZ, "the grid's y dimension");
  check_size(attention.heads_kv, "attention.heads_kv", 1, kMaxGridYZ, "at most heads_q");
  check_size(attention.seqlen_q, "attention.seqlen_q", 0, kMaxSeqlen, "2^30: 32-bit mask math");
  check_size(attention.seqlen_k, "attention.seqlen_k", 0, kMaxSeqlen, "2^30: 32-bit mask math");
  const std::int64_t most = wide_head_dims ? wide_forward_space::kMaxHeadDim : space::kMaxHeadDim;
  if (attention.head_dim < space::kMinHeadDim || attention.head_dim > most ||
      attention.head_dim % 8 != 0) {
    throw InvalidArgument("attention.head_dim",
                          "is " + std::to_string(attention.head_dim) +
                              "; supported: multiples of 8 from 8 to " + std::to_string(most) +
                              (wide_head_dims ? ""
                                              : " (to 576 in the inference forward, "
                                                "Runtime::forward with Sequences)"));
  }
  if (attention.head_dim_v != 0 &&
      (attention.head_dim_v < space::kMinHeadDim || attention.head_dim_v > attention.head_dim ||
       attention.head_dim_v % 8 != 0)) {
    throw InvalidArgument("attention.head_dim_v",
                          "is " + std::to_string(attention.head_dim_v) +
                              "; supported: 0 (head_dim) or a multiple of 8 from 8 to head_dim (" +
                              std::to_string(attention.head_dim) + ")");
  }
  if (attention.heads_q % attention.heads_kv != 0) {
    throw InvalidArgument("attention.heads_kv",
                          "is " + std::to_string(attention.heads_kv) + "; must divide heads_q (" +
                              std::to_string(attention.heads_q) +
                              "): each key/value head serves a group of query heads");
  }
}

void check_mask(const Attention& attention) {
  auto check_side = [](std::int64_t window, const std::string& name) {
    if (window < -1) {
      throw InvalidArgument(
          name, "is " + std::to_string(window) + "; must be -1 (unbounded) or a key count >= 0");
    }
  };
  check_side(attention.window_left, "attention.window_left");
  check_side(attention.window_right, "attention.window_right");
  if (attention.causal && attention.window_right > 0) {
    throw InvalidArgument("attention.window_right",
                          "is " + std::to_string(attention.window_right) +
                              " with causal set; causal hides every key right of the diagonal, "
                              "so window_right must be -1 or 0");
  }
}

void check_scales(const Attention& attention) {
  if (!std::isfinite(attention.softcap) || attention.softcap < 0.0f) {
    throw InvalidArgument("attention.softcap", "must be finite and >= 0 (0 turns it off)");
  }
  if (attention.scale && (!std::isfinite(*attention.scale) || *attention.scale <= 0.0f)) {
    throw InvalidArgument("attention.scale", "must be finite and > 0 when set");
  }
  const ScoreScales scales = forward_score_scales(attention);
  if (!std::isfinite(scales.score_scale) || !std::isfinite(scales.softcap_log2)) {
    throw InvalidArgument(attention.softcap > 0.0f ? "attention.softcap" : "attention.scale",
                          "the folded score scale overflows fp32 (scale · log2(e), or scale / "
                          "softcap and softcap · log2(e))");
  }
}

void check_dropout(const Attention& attention) {
  if (!std::isfinite(attention.dropout_p) || attention.dropout_p < 0.0f ||
      attention.dropout_p >= 1.0f) {
    throw InvalidArgument("attention.dropout_p", "is " + std::to_string(attention.dropout_p) +
                                                     "; must be in [0, 1) (0 turns it off)");
  }
}

void check_lse(const TensorView& lse, const Attention& attention) {
  check_tensor(lse, "lse", 3);
  if (lse.dtype != DType::f32) {
    throw InvalidArgument("lse.dtype",
                          "is " + std::string(dtype_name(lse.dtype)) + "; must be fp32");
  }
  check_shape(lse, "lse", {attention.batch, attention.heads_q, attention.seqlen_q},
              "[batch, heads_q, seqlen_q]");
  if (lse.shape[2] > 1 && lse.strides[2] != 1) {
    throw InvalidArgument(
        "lse.strides", "the seqlen_q stride is " + std::to_string(lse.strides[2]) + "; must be 1");
  }
  check_no_self_overlap(lse, "lse");
}

/// The outputs (o, lse) share no memory with the inputs or each other.
void check_outputs_disjoint(const TensorView& q, const TensorView& k, const TensorView& v,
                            const TensorView& o, const TensorView& lse) {
  check_disjoint(o, q, "o", "q", Role::input);
  check_disjoint(o, k, "o", "k", Role::input);
  check_disjoint(o, v, "o", "v", Role::input);
  if (lse.data == nullptr) return;
  check_disjoint(o, lse, "o", "lse", Role::output);
  check_disjoint(lse, q, "lse", "q", Role::input);
  check_disjoint(lse, k, "lse", "k", Role::input);
  check_disjoint(lse, v, "lse", "v", Role::input);
}

}  // namespace

/// Dtype of q (fp16 or bf16) and of k, v, o (the same as q).
void check_query_dtypes(const TensorView& q, const TensorView& o) {
  if (q.dtype == DType::e4m3) {
    throw InvalidArgument("q.dtype",
                          "is e4m3, which only the dense forward takes (Runtime::forward "
                          "without Sequences: the fp8 forward); this call takes fp16 "
                          "and bf16");
  }
  if (q.dtype != DType::f16 && q.dtype != DType::bf16) {
    throw InvalidArgument(
        "q.dtype", "is " + std::string(dtype_name(q.dtype)) + "; attention supports fp16 and bf16");
  }
  check_same_dtype(o, q, "o", "q");
}

void check_attention_dtypes(const TensorView& q, const TensorView& k, const TensorView& v,
                            const TensorView& o) {
  check_query_dtypes(q, o);
  check_same_dtype(k, q, "k", "q");
  check_same_dtype(v, q, "v", "q");
}

void check_head_tensors(const Attention& a, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& o) {
  check_head_tensor(q, "q", a.batch, a.seqlen_q, a.heads_q, a.head_dim,
                    "[batch, seqlen_q, heads_q, head_dim]");
  check_head_tensor(k, "k", a.batch, a.seqlen_k, a.heads_kv, a.head_dim,
                    "[batch, seqlen_k, heads_kv, head_dim]");
  const char* v_dims = a.head_dim_v != 0 ? "[batch, seqlen_k, heads_kv, head_dim_v]"
                                         : "[batch, seqlen_k, heads_kv, head_dim]";
  const char* o_dims = a.head_dim_v != 0 ? "[batch, seqlen_q, heads_q, head_dim_v]"
                                         : "[batch, seqlen_q, heads_q, head_dim]";
  check_head_tensor(v, "v", a.batch, a.seqlen_k, a.heads_kv, a.value_head_dim(), v_dims);
  check_head_tensor(o, "o", a.batch, a.seqlen_q, a.heads_q, a.value_head_dim(), o_dims);
}

void check_attention_ranks(const TensorView& q, const TensorView& k, const TensorView& v,
                           const TensorView& o) {
  check_tensor(q, "q", 4);
  check_tensor(k, "k", 4);
  check_tensor(v, "v", 4);
  check_tensor(o, "o", 4);
}

void check_attention_tensors(const Attention& a, const TensorView& q, const TensorView& k,
                             const TensorView& v, const TensorView& o) {
  check_attention_ranks(q, k, v, o);
  check_attention_dtypes(q, k, v, o);
  check_head_tensors(a, q, k, v, o);
}

void validate_attention(const Attention& attention, bool wide_head_dims) {
  check_sizes(attention, wide_head_dims);
  check_mask(attention);
  check_scales(attention);
  check_dropout(attention);
  check_score_modifiers(attention);
  check_block_mask(attention);
}

void validate_forward_arguments(const Attention& attention, const TensorView& q,
                                const TensorView& k, const TensorView& v, const TensorView& o,
                                const TensorView& lse) {
  validate_attention(attention);
  if (q.dtype == DType::e4m3) {
    check_fp8_forward_tensors(attention, q, k, v, o);
  } else {
    check_attention_tensors(attention, q, k, v, o);
    check_no_fp8_descales(attention);
  }
  check_no_self_overlap(o, "o");
  if (lse.data != nullptr) check_lse(lse, attention);
  check_outputs_disjoint(q, k, v, o, lse);
}

}  // namespace flashjit::kernels
