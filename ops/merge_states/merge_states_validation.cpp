// The merge_states op's argument checks, both forms: every bad argument is named before
// anything is launched or written.
#include <limits>
#include <string>

#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"
#include "merge_states/merge_states.hpp"
#include "merge_states/merge_states_space.cuh"

namespace flashjit::kernels {
namespace {

void check_lse_dtype(const TensorView& lse, const std::string& name) {
  if (lse.dtype != DType::f32) {
    throw InvalidArgument(name + ".dtype", "is " + std::string(dtype_name(lse.dtype)) +
                                               "; LSEs are fp32 (natural log)");
  }
}

/// The kernel reads a row's head_dim values with unit stride.
void check_unit_head_dim_stride(const TensorView& view, const std::string& name) {
  if (view.strides[view.rank - 1] != 1 && view.shape[view.rank - 1] > 1) {
    throw InvalidArgument(name + ".strides",
                          "the head_dim stride must be 1 (the other dimensions may have any)");
  }
}

void check_head_dim(std::int64_t head_dim, const std::string& name) {
  if (head_dim < 1 || head_dim > merge_states_space::kMaxHeadDim) {
    throw InvalidArgument(name + ".shape", "head_dim (the last dimension) is " +
                                               std::to_string(head_dim) + "; must be from 1 to " +
                                               std::to_string(merge_states_space::kMaxHeadDim));
  }
}

void check_heads(std::int64_t heads, const std::string& name) {
  if (heads > std::numeric_limits<int>::max()) {
    throw InvalidArgument(name + ".shape", "more than 2^31 - 1 heads are not supported");
  }
}

void check_partials(const TensorView& partial_o, const TensorView& partial_lse) {
  check_tensor(partial_o, "partial_o", 4);
  check_tensor(partial_lse, "partial_lse", 3);
  check_value_dtype(partial_o, "partial_o");
  check_lse_dtype(partial_lse, "partial_lse");
  const std::int64_t partials = partial_o.shape[0];
  if (partials < 1 || partials > std::numeric_limits<int>::max()) {
    throw InvalidArgument("partial_o.shape", "num_partials (dimension [0]) is " +
                                                 std::to_string(partials) +
                                                 "; must be from 1 to 2^31 - 1");
  }
  check_head_dim(partial_o.shape[3], "partial_o");
  check_heads(partial_o.shape[2], "partial_o");
  check_unit_head_dim_stride(partial_o, "partial_o");
  check_shape(partial_lse, "partial_lse", {partials, partial_o.shape[1], partial_o.shape[2]},
              "[num_partials, tokens, heads] of partial_o");
}

void check_merged(const TensorView& partial_o, const TensorView& o, const TensorView& lse) {
  check_tensor(o, "o", 3);
  check_value_dtype(o, "o");
  if (!merge_dtypes_supported(partial_o.dtype, o.dtype)) {
    throw InvalidArgument("o.dtype", "is " + std::string(dtype_name(o.dtype)) +
                                         "; must be partial_o's dtype (" +
                                         std::string(dtype_name(partial_o.dtype)) +
                                         ") or fp32 (fp32 partials merge into any dtype)");
  }
  check_shape(o, "o", {partial_o.shape[1], partial_o.shape[2], partial_o.shape[3]},
              "[tokens, heads, head_dim] of partial_o");
  check_unit_head_dim_stride(o, "o");
  check_no_self_overlap(o, "o");
  if (lse.data == nullptr) return;  // the merged LSE is optional
  check_tensor(lse, "lse", 2);
  check_lse_dtype(lse, "lse");
  check_shape(lse, "lse", {partial_o.shape[1], partial_o.shape[2]}, "[tokens, heads] of partial_o");
  check_no_self_overlap(lse, "lse");
}

}  // namespace

void validate_merge_states_arguments(const TensorView& partial_o, const TensorView& partial_lse,
                                     const TensorView& o, const TensorView& lse) {
  check_partials(partial_o, partial_lse);
  check_merged(partial_o, o, lse);
  check_disjoint(o, partial_o, "o", "partial_o", Role::input);
  check_disjoint(o, partial_lse, "o", "partial_lse", Role::input);
  if (lse.data == nullptr) return;
  check_disjoint(lse, partial_o, "lse", "partial_o", Role::input);
  check_disjoint(lse, partial_lse, "lse", "partial_lse", Role::input);
  check_disjoint(o, lse, "o", "lse", Role::output);
}

void validate_merge_state_pair_arguments(const TensorView& o_a, const TensorView& lse_a,
                                         const TensorView& o_b, const TensorView& lse_b) {
  check_tensor(o_a, "o_a", 3);
  check_tensor(lse_a, "lse_a", 2);
  check_tensor(o_b, "o_b", 3);
  check_tensor(lse_b, "lse_b", 2);
  check_value_dtype(o_a, "o_a");
  check_value_dtype(o_b, "o_b");
  check_head_dim(o_a.shape[2], "o_a");
  check_heads(o_a.shape[1], "o_a");
  check_same_dtype(o_b, o_a, "o_b", "o_a");
  check_lse_dtype(lse_a, "lse_a");
  check_lse_dtype(lse_b, "lse_b");
  const std::string dims = "[tokens, heads, head_dim] of o_a";
  check_shape(o_b, "o_b", {o_a.shape[0], o_a.shape[1], o_a.shape[2]}, dims);
  check_shape(lse_a, "lse_a", {o_a.shape[0], o_a.shape[1]}, "[tokens, heads] of o_a");
  check_shape(lse_b, "lse_b", {o_a.shape[0], o_a.shape[1]}, "[tokens, heads] of o_a");
  check_unit_head_dim_stride(o_a, "o_a");
  check_unit_head_dim_stride(o_b, "o_b");
  check_no_self_overlap(o_a, "o_a");
  check_no_self_overlap(lse_a, "lse_a");
  check_disjoint(o_a, o_b, "o_a", "o_b", Role::input);
  check_disjoint(o_a, lse_b, "o_a", "lse_b", Role::input);
  check_disjoint(lse_a, o_b, "lse_a", "o_b", Role::input);
  check_disjoint(lse_a, lse_b, "lse_a", "lse_b", Role::input);
  check_disjoint(o_a, lse_a, "o_a", "lse_a", Role::output);
}

}  // namespace flashjit::kernels
