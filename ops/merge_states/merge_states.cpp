#include "merge_states/merge_states.hpp"

#include <limits>

#include "flashjit/error.hpp"
#include "merge_states/merge_states_params.cuh"
#include "merge_states/merge_states_space.cuh"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace space = flashjit::merge_states_space;

namespace {

constexpr DType kDTypes[] = {DType::f16, DType::bf16, DType::f32};

std::string element_type(DType dtype) {
  static const char* kElementTypes[] = {"flashjit::half_t", "flashjit::bfloat16_t", "float"};
  return kElementTypes[static_cast<int>(dtype)];
}

TokenHeadRows rows_of(const TensorView& view, int first_dim) {
  return {view.data, view.strides[first_dim], view.strides[first_dim + 1]};
}

TokenHeadLse lse_of(const TensorView& view, int first_dim) {
  if (view.data == nullptr) return {nullptr, 0, 0};
  return {static_cast<float*>(view.data), view.strides[first_dim], view.strides[first_dim + 1]};
}

/// The grid of `rows` (token, head) rows; InvalidArgument(`name`) when it exceeds one launch.
detail::LaunchShape launch_shape(const MergeStatesConfig& config, std::int64_t rows,
                                 const std::string& name, Stream stream) {
  const int rows_per_block = space::rows_per_block(config.threads_per_row);
  const std::int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  if (blocks > std::numeric_limits<int>::max()) {
    throw InvalidArgument(
        name, "too many (token, head) rows for one launch (at most " +
                  std::to_string(std::int64_t{rows_per_block} * std::numeric_limits<int>::max()) +
                  ")");
  }
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(blocks);
  shape.block_x = static_cast<unsigned>(space::kBlockThreads);
  shape.stream = static_cast<CUstream>(stream);
  shape.overlap_previous = true;  // the kernel waits for the grid before it
  return shape;
}

detail::KernelBuffer buffer_of(const TensorView& view, const char* name) {
  return {view.data, static_cast<std::size_t>(view.span_bytes()), name};
}

}  // namespace

bool merge_dtypes_supported(DType input, DType output) {
  return output == input || input == DType::f32 || output == DType::f32;
}

std::vector<MergeStatesConfig> merge_states_configs() {
  std::vector<MergeStatesConfig> configs;
  for (bool in_place : {false, true}) {
    for (DType input : kDTypes) {
      for (DType output : kDTypes) {
        if (!merge_dtypes_supported(input, output) || (in_place && output != input)) continue;
        for (int threads : space::kThreadsPerRow) {
          for (int columns : space::kColumnsPerThread) {
            if (space::config_valid(threads, columns)) {
              configs.push_back({input, output, threads, columns, in_place});
            }
          }
        }
      }
    }
  }
  return configs;
}

MergeStatesConfig default_merge_states_config(DType input, DType output, int head_dim,
                                              bool in_place) {
  // About four columns a thread keeps four loads per partial in flight, and a warp's lanes
  // still read neighbouring elements of one row (head dim 128: 32 threads read it in one step).
  constexpr int kPreferredColumns = 4;
  MergeStatesConfig config{input, output, space::kThreadsPerRow[0], 1, in_place};
  for (int threads : space::kThreadsPerRow) {
    config.threads_per_row = threads;  // ends at the most threads for the widest rows
    if (threads * kPreferredColumns >= head_dim) break;
  }
  for (int columns : space::kColumnsPerThread) {
    config.columns_per_thread = columns;  // ends at 4 for rows the threads do not cover
    if (config.threads_per_row * columns >= head_dim) break;
  }
  return config;
}

detail::KernelSpec merge_states_spec(const MergeStatesConfig& config, const std::string& arch) {
  detail::KernelSpec spec;
  spec.op = "merge-states";
  spec.header = "merge_states/merge_states_kernel.cuh";
  const std::string entry = config.in_place ? "merge_state_pair_kernel" : "merge_states_kernel";
  spec.name_expression = "flashjit::" + entry + "<flashjit::MergeStatesConfig<" +
                         element_type(config.input) + ", " + element_type(config.output) + ", " +
                         std::to_string(config.threads_per_row) + ", " +
                         std::to_string(config.columns_per_thread) + ">>";
  spec.arch = arch;
  spec.role = config.in_place ? "merge_state_pair" : "merge_states";
  spec.traits = {std::string(dtype_name(config.input))};
  if (!config.in_place) spec.traits.push_back("to" + std::string(dtype_name(config.output)));
  spec.traits.push_back(detail::trait("t", config.threads_per_row));
  spec.traits.push_back(detail::trait("c", config.columns_per_thread));
  spec.readable_name = detail::name_of(spec.role, 0, spec.traits);
  spec.threads = space::kBlockThreads;
  spec.dynamic_shared_bytes = 0;
  return spec;
}

void run_merge_states(detail::RuntimeBackend& backend, const TensorView& partial_o,
                      const TensorView& partial_lse, const TensorView& o, const TensorView& lse,
                      Stream stream) {
  validate_merge_states_arguments(partial_o, partial_lse, o, lse);
  if (o.numel() == 0) return;  // no (token, head) row (head_dim is at least 1): no work
  const auto head_dim = static_cast<int>(o.shape[2]);
  const MergeStatesConfig config =
      default_merge_states_config(partial_o.dtype, o.dtype, head_dim, false);
  const MergeStatesParams params{rows_of(partial_o, 1),
                                 lse_of(partial_lse, 1),
                                 partial_o.strides[0],
                                 partial_lse.strides[0],
                                 rows_of(o, 0),
                                 lse_of(lse, 0),
                                 o.shape[0],
                                 static_cast<int>(o.shape[1]),
                                 head_dim,
                                 static_cast<int>(partial_o.shape[0])};
  std::vector<detail::KernelBuffer> buffers = {
      buffer_of(partial_o, "partial_o"), buffer_of(partial_lse, "partial_lse"), buffer_of(o, "o")};
  if (lse.data != nullptr) buffers.push_back(buffer_of(lse, "lse"));
  detail::launch_kernel(backend.executor(), merge_states_spec(config, backend.info().arch()),
                        launch_shape(config, o.shape[0] * o.shape[1], "o.shape", stream), buffers,
                        params);
}

void run_merge_state_pair(detail::RuntimeBackend& backend, const TensorView& o_a,
                          const TensorView& lse_a, const TensorView& o_b, const TensorView& lse_b,
                          Stream stream) {
  validate_merge_state_pair_arguments(o_a, lse_a, o_b, lse_b);
  if (o_a.numel() == 0) return;  // no (token, head) row: no work
  const auto head_dim = static_cast<int>(o_a.shape[2]);
  const MergeStatesConfig config =
      default_merge_states_config(o_a.dtype, o_a.dtype, head_dim, true);
  const MergeStatePairParams params{rows_of(o_a, 0), lse_of(lse_a, 0),
                                    rows_of(o_b, 0), lse_of(lse_b, 0),
                                    o_a.shape[0],    static_cast<int>(o_a.shape[1]),
                                    head_dim};
  const std::vector<detail::KernelBuffer> buffers = {
      buffer_of(o_a, "o_a"), buffer_of(lse_a, "lse_a"), buffer_of(o_b, "o_b"),
      buffer_of(lse_b, "lse_b")};
  detail::launch_kernel(backend.executor(), merge_states_spec(config, backend.info().arch()),
                        launch_shape(config, o_a.shape[0] * o_a.shape[1], "o_a.shape", stream),
                        buffers, params);
}

}  // namespace flashjit::kernels
