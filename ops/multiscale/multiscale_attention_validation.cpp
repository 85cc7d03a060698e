// Argument validation of multi-scale attention: every bad input is an InvalidArgument naming
// the argument and what is accepted, before anything is compiled or launched. Sizes, dtypes and
// the q, k, v, o tensors are checked as attention's (the same rules, the same names).
#include <cmath>
#include <string>

#include "attention/attention_common.hpp"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"
#include "multiscale/multiscale_attention.hpp"

namespace flashjit::kernels {
namespace {

std::string str(std::int64_t n) { return std::to_string(n); }

void check_fp32(const TensorView& view, const std::string& name) {
  if (view.dtype != DType::f32) {
    throw InvalidArgument(name + ".dtype",
                          "is " + std::string(dtype_name(view.dtype)) + "; must be fp32");
  }
}

/// An fp32 tensor of rank 3 and `shape` (named by `dims`, whose last entry `last` names the
/// dimension that must have unit stride).
void check_fp32_rank3(const TensorView& view, const std::string& name,
                      std::initializer_list<std::int64_t> shape, const std::string& dims,
                      const char* last) {
  check_tensor(view, name, 3);
  check_fp32(view, name);
  check_shape(view, name, shape, dims);
  if (view.shape[2] > 1 && view.strides[2] != 1) {
    throw InvalidArgument(name + ".strides", std::string("the ") + last + " stride is " +
                                                 str(view.strides[2]) + "; must be 1");
  }
}

/// rowsum: fp32 [batch, heads_q, seqlen_q], unit last stride.
void check_rows(const TensorView& rows, const std::string& name, const MultiScaleAttention& a) {
  check_fp32_rank3(rows, name, {a.batch, a.heads_q, a.seqlen_q}, "[batch, heads_q, seqlen_q]",
                   "seqlen_q");
}

/// The mask tensor (and its gradient): fp32 [heads_q, seqlen_q, seqlen_k], unit last stride.
void check_mask_tensor(const TensorView& m, const std::string& name, const MultiScaleAttention& a) {
  check_fp32_rank3(m, name, {a.heads_q, a.seqlen_q, a.seqlen_k}, "[heads_q, seqlen_q, seqlen_k]",
                   "seqlen_k");
}

void check_mask(const TensorView& mask, const MultiScaleAttention& a) {
  if (a.mask == MultiScaleMask::decay) {
    if (mask.rank != 1) {
      throw InvalidArgument("mask.rank", "is " + str(mask.rank) +
                                             "; the decay mask takes one rate per query head, "
                                             "[heads_q] fp32");
    }
    check_tensor(mask, "mask", 1);
    check_fp32(mask, "mask");
    check_shape(mask, "mask", {a.heads_q}, "[heads_q]");
    return;
  }
  check_mask_tensor(mask, "mask", a);
}

void check_scale(const MultiScaleAttention& a) {
  if (!std::isfinite(a.scale) || a.scale < 0.0f) {
    throw InvalidArgument("attention.scale", "is " + std::to_string(a.scale) +
                                                 "; must be finite and > 0, or 0 for "
                                                 "1/sqrt(head_dim)");
  }
}

/// Every output shares no element with an input or another output.
void check_disjoint_all(std::initializer_list<std::pair<const TensorView*, const char*>> outputs,
                        std::initializer_list<std::pair<const TensorView*, const char*>> inputs) {
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    if (out->first->data == nullptr) continue;
    check_no_self_overlap(*out->first, out->second);
    for (const auto& [input, name] : inputs) {
      if (input->data != nullptr)
        check_disjoint(*out->first, *input, out->second, name, Role::input);
    }
    for (auto other = outputs.begin(); other != out; ++other) {
      if (other->first->data != nullptr) {
        check_disjoint(*out->first, *other->first, out->second, other->second, Role::output);
      }
    }
  }
}

void check_inputs(const MultiScaleAttention& attention, const TensorView& q, const TensorView& k,
                  const TensorView& v, const TensorView& mask, const TensorView& o) {
  const Attention a = multiscale_as_attention(attention);
  validate_attention(a);  // sizes and head dim, as attention's
  check_scale(attention);
  check_attention_tensors(a, q, k, v, o);
  check_mask(mask, attention);
}

}  // namespace

void validate_multiscale_forward(const MultiScaleAttention& attention, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& mask,
                                 const TensorView& o, const TensorView& rowsum) {
  check_inputs(attention, q, k, v, mask, o);
  if (rowsum.data != nullptr) check_rows(rowsum, "rowsum", attention);
  check_disjoint_all({{&o, "o"}, {&rowsum, "rowsum"}},
                     {{&q, "q"}, {&k, "k"}, {&v, "v"}, {&mask, "mask"}});
}

void validate_multiscale_backward(const MultiScaleAttention& attention, const TensorView& q,
                                  const TensorView& k, const TensorView& v, const TensorView& mask,
                                  const TensorView& o, const TensorView& rowsum,
                                  const TensorView& dout, const TensorView& dq,
                                  const TensorView& dk, const TensorView& dv,
                                  const TensorView& dmask) {
  check_inputs(attention, q, k, v, mask, o);
  if (rowsum.data == nullptr && attention.batch * attention.heads_q * attention.seqlen_q > 0) {
    throw InvalidArgument("rowsum",
                          "is required: the backward reads the forward's r = rowsum(|S|)");
  }
  if (rowsum.data != nullptr) check_rows(rowsum, "rowsum", attention);
  const Attention a = multiscale_as_attention(attention);
  for (const auto& [view, name] :
       {std::pair{&dout, "dout"}, {&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}}) {
    check_tensor(*view, name, 4);
    check_same_dtype(*view, q, name, "q");
  }
  check_head_tensor(dout, "dout", a.batch, a.seqlen_q, a.heads_q, a.head_dim,
                    "[batch, seqlen_q, heads_q, head_dim]");
  check_head_tensor(dq, "dq", a.batch, a.seqlen_q, a.heads_q, a.head_dim,
                    "[batch, seqlen_q, heads_q, head_dim]");
  check_head_tensor(dk, "dk", a.batch, a.seqlen_k, a.heads_kv, a.head_dim,
                    "[batch, seqlen_k, heads_kv, head_dim]");
  check_head_tensor(dv, "dv", a.batch, a.seqlen_k, a.heads_kv, a.head_dim,
                    "[batch, seqlen_k, heads_kv, head_dim]");
  if (dmask.data != nullptr) {
    if (attention.mask == MultiScaleMask::decay) {
      throw InvalidArgument("dmask",
                            "must be null with the decay mask: its rates are not "
                            "learned through this call");
    }
    check_mask_tensor(dmask, "dmask", attention);
  }
  check_disjoint_all({{&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}, {&dmask, "dmask"}},
                     {{&q, "q"},
                      {&k, "k"},
                      {&v, "v"},
                      {&mask, "mask"},
                      {&o, "o"},
                      {&rowsum, "rowsum"},
                      {&dout, "dout"}});
}

}  // namespace flashjit::kernels
