// Argument validation of the attention backward op (docs/design.md, "Bad input"): everything the
// forward checks of q, k, v, o and lse (lse now required), then the gradients: dout like o,
// dq like q, dk and dv like k and v, and outputs that overlap nothing.
#include <string>
#include <utility>

#include "attention/attention_backward.hpp"
#include "attention/attention_common.hpp"
#include "attention/modifiers/attention_captures.hpp"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

/// dout, dq, dk, dv: present, rank 4, the dtype of q, and the shape and strides of the tensor
/// each mirrors.
void check_gradient_tensors(const Attention& a, const TensorView& q, const TensorView& dout,
                            const TensorView& dq, const TensorView& dk, const TensorView& dv) {
  check_tensor(dout, "dout", 4);
  check_tensor(dq, "dq", 4);
  check_tensor(dk, "dk", 4);
  check_tensor(dv, "dv", 4);
  check_same_dtype(dout, q, "dout", "q");
  check_same_dtype(dq, q, "dq", "q");
  check_same_dtype(dk, q, "dk", "q");
  check_same_dtype(dv, q, "dv", "q");
  const bool v_dim = a.head_dim_v != 0;
  check_head_tensor(dout, "dout", a.batch, a.seqlen_q, a.heads_q, a.value_head_dim(),
                    v_dim ? "[batch, seqlen_q, heads_q, head_dim_v] (like o)"
                          : "[batch, seqlen_q, heads_q, head_dim] (like o)");
  check_head_tensor(dq, "dq", a.batch, a.seqlen_q, a.heads_q, a.head_dim,
                    "[batch, seqlen_q, heads_q, head_dim] (like q)");
  check_head_tensor(dk, "dk", a.batch, a.seqlen_k, a.heads_kv, a.head_dim,
                    "[batch, seqlen_k, heads_kv, head_dim] (like k)");
  check_head_tensor(dv, "dv", a.batch, a.seqlen_k, a.heads_kv, a.value_head_dim(),
                    v_dim ? "[batch, seqlen_k, heads_kv, head_dim_v] (like v)"
                          : "[batch, seqlen_k, heads_kv, head_dim] (like v)");
}

}  // namespace

/// Each output (dq, dk, dv, the captures' gradients) writes every element once and shares no
/// memory with an input or another output: the kernels read the inputs while other blocks
/// write the outputs.
void check_gradients_disjoint(const Attention& attention, const TensorView& q, const TensorView& k,
                              const TensorView& v, const TensorView& o, const TensorView& lse,
                              const TensorView& dout, const TensorView& dq, const TensorView& dk,
                              const TensorView& dv) {
  const std::pair<const TensorView*, const char*> inputs[] = {
      {&q, "q"}, {&k, "k"}, {&v, "v"}, {&o, "o"}, {&lse, "lse"}, {&dout, "dout"}};
  const std::pair<const TensorView*, const char*> outputs[] = {
      {&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}};
  for (const auto& [output, output_name] : outputs) {
    check_no_self_overlap(*output, output_name);
    for (const auto& [input, input_name] : inputs) {
      check_disjoint(*output, *input, output_name, input_name, Role::input);
    }
  }
  check_disjoint(dq, dk, "dq", "dk", Role::output);
  check_disjoint(dq, dv, "dq", "dv", Role::output);
  check_disjoint(dk, dv, "dk", "dv", Role::output);
  check_capture_gradients_disjoint(attention, {{&q, "q", false},
                                               {&k, "k", false},
                                               {&v, "v", false},
                                               {&o, "o", false},
                                               {&lse, "lse", false},
                                               {&dout, "dout", false},
                                               {&dq, "dq", true},
                                               {&dk, "dk", true},
                                               {&dv, "dv", true}});
}

void validate_backward_arguments(const Attention& attention, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& o,
                                 const TensorView& lse, const TensorView& dout,
                                 const TensorView& dq, const TensorView& dk, const TensorView& dv) {
  // The forward may skip lse; the backward recomputes P = exp(S − LSE) from it.
  const bool has_rows = attention.batch * attention.heads_q * attention.seqlen_q > 0;
  if (lse.data == nullptr && has_rows) {
    throw InvalidArgument("lse",
                          "data pointer is null; backward needs the forward pass's lse "
                          "(fp32 [batch, heads_q, seqlen_q])");
  }
  if (q.dtype == DType::e4m3) {
    throw InvalidArgument("q.dtype",
                          "is e4m3: the fp8 forward has no backward (nor has "
                          "FlashAttention-3's); train in fp16 or bf16");
  }
  validate_forward_arguments(attention, q, k, v, o, lse);
  check_gradient_tensors(attention, q, dout, dq, dk, dv);
  check_gradients_disjoint(attention, q, k, v, o, lse, dout, dq, dk, dv);
}

}  // namespace flashjit::kernels
