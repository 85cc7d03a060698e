// The fp8 forward's argument checks (attention_forward_validation.cpp calls them for an e4m3
// q): what it takes and, by name, what it does not.
#include <string>

#include "attention/attention_common.hpp"
#include "attention/attention_forward.hpp"
#include "attention/fp8/fp8_forward_traits.cuh"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

/// What the fp8 forward lacks: each is refused by its field's name.
void check_fp8_features(const Attention& a) {
  const auto refuse = [](const char* name, const std::string& what) {
    throw InvalidArgument(name, what + "; the fp8 forward (e4m3 q, k, v) does not take it");
  };
  if (!a.score_mod.empty()) refuse("attention.score_mod", "is set");
  if (!a.mask_mod.empty()) refuse("attention.mask_mod", "is set");
  if (present(a.block_mask)) refuse("attention.block_mask", "is set");
  if (!a.captures.empty()) refuse("attention.captures", "are given");
  if (a.dropout_p > 0.0f) refuse("attention.dropout_p", "is " + std::to_string(a.dropout_p));
}

/// A head dim of the fp8 forward: whole 16-byte rows of codes.
void check_fp8_head_dim(std::int64_t head_dim, const char* name) {
  if (head_dim % 16 != 0) {
    throw InvalidArgument(name, "is " + std::to_string(head_dim) +
                                    "; the fp8 forward takes multiples of 16 (16 codes a copy)");
  }
}

}  // namespace

void check_fp8_forward_tensors(const Attention& a, const TensorView& q, const TensorView& k,
                               const TensorView& v, const TensorView& o) {
  check_attention_ranks(q, k, v, o);
  check_same_dtype(k, q, "k", "q");
  check_same_dtype(v, q, "v", "q");
  if (o.dtype != DType::bf16) {
    throw InvalidArgument("o.dtype", "is " + std::string(dtype_name(o.dtype)) +
                                         "; the fp8 forward writes bf16 (FlashAttention-3's)");
  }
  check_fp8_features(a);
  check_fp8_head_dim(a.head_dim, "attention.head_dim");
  check_fp8_head_dim(a.value_head_dim(), "attention.head_dim_v");
  check_head_tensors(a, q, k, v, o);
  for (const NamedDescale& descale : fp8_descales(a)) {
    check_descale(*descale.view, std::string("attention.") + descale.name, a);
  }
}

void check_no_fp8_descales(const Attention& a) {
  for (const NamedDescale& descale : fp8_descales(a)) {
    if (present(*descale.view)) {
      throw InvalidArgument(std::string("attention.") + descale.name,
                            "is given; it is the fp8 forward's (a dense Runtime::forward "
                            "whose q, k and v are e4m3)");
    }
  }
}

}  // namespace flashjit::kernels
