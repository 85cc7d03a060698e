#pragma once
// Host side of the merge_states op (the combiner of docs/design.md): configs, specs,
// argument validation, launch. Two forms: N partial states stacked along a leading axis merged
// into a separate output, and one state merged into another in place.
#include <string>
#include <vector>

#include "flashjit/dtype.hpp"
#include "flashjit/tensor.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// One point of the merge_states config space (ops/merge_states/merge_states_space.cuh).
struct MergeStatesConfig {
  DType input = DType::f32;   ///< the partials' O
  DType output = DType::f32;  ///< the merged O (the input's in the in-place form)
  int threads_per_row = 32;
  int columns_per_thread = 4;
  bool in_place = false;  ///< the two-way in-place form (merge_state_pair_kernel)

  bool operator==(const MergeStatesConfig&) const = default;
};

/// Whether partials of dtype `input` merge into an output of dtype `output`: fp32 partials (what
/// split-KV writes) into any dtype, 16-bit partials into their own dtype or fp32.
bool merge_dtypes_supported(DType input, DType output);

/// Every valid config of the space, for every supported dtype pair of both forms, in a fixed
/// order.
std::vector<MergeStatesConfig> merge_states_configs();

/// The heuristic config for rows of `head_dim` columns: enough threads per row for about four
/// columns each (8 to 32), and as many columns per step as the row fills (1, 2 or 4).
MergeStatesConfig default_merge_states_config(DType input, DType output, int head_dim,
                                              bool in_place);

/// The kernel spec of `config` for target `arch`.
detail::KernelSpec merge_states_spec(const MergeStatesConfig& config, const std::string& arch);

/// Checks merge_states' arguments (see Runtime::merge_states); throws InvalidArgument naming
/// the first bad one ("partial_o", "partial_lse.shape", "o.dtype", ...).
void validate_merge_states_arguments(const TensorView& partial_o, const TensorView& partial_lse,
                                     const TensorView& o, const TensorView& lse);

/// Checks merge_state_in_place's arguments (see Runtime::merge_state_in_place); throws
/// InvalidArgument naming the first bad one ("o_a", "lse_b.shape", ...).
void validate_merge_state_pair_arguments(const TensorView& o_a, const TensorView& lse_a,
                                         const TensorView& o_b, const TensorView& lse_b);

/// Runtime::merge_states on `backend`: validates (nothing launched on bad input), then launches
/// the heuristic config for the head dim.
void run_merge_states(detail::RuntimeBackend& backend, const TensorView& partial_o,
                      const TensorView& partial_lse, const TensorView& o, const TensorView& lse,
                      Stream stream);

/// Runtime::merge_state_in_place on `backend`, validated first like run_merge_states.
void run_merge_state_pair(detail::RuntimeBackend& backend, const TensorView& o_a,
                          const TensorView& lse_a, const TensorView& o_b, const TensorView& lse_b,
                          Stream stream);

}  // namespace flashjit::kernels
