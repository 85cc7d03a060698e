#include "layer_norm.hpp"

#include <algorithm>
#include <limits>

#include "flashjit/error.hpp"
#include "layer_norm/layer_norm_params.cuh"
#include "layer_norm/layer_norm_space.cuh"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace space = flashjit::layer_norm_space;

namespace {

constexpr DType kDTypes[] = {DType::f16, DType::bf16, DType::f32};

std::string element_type(DType dtype) {
  static const char* kElementTypes[] = {"flashjit::half_t", "flashjit::bfloat16_t", "float"};
  return kElementTypes[static_cast<int>(dtype)];
}

RowMajor rows_of(const TensorView& view) {
  return {view.data, view.data == nullptr ? 0 : view.strides[0]};
}

float* stats_of(const TensorView& view) { return static_cast<float*>(view.data); }

detail::KernelBuffer buffer_of(const TensorView& view, const char* name) {
  return {view.data, static_cast<std::size_t>(view.span_bytes()), name};
}

/// The buffers a launch touches: the present views among `views`, named.
std::vector<detail::KernelBuffer> buffers_of(
    std::initializer_list<std::pair<const TensorView*, const char*>> views) {
  std::vector<detail::KernelBuffer> buffers;
  for (const auto& [view, name] : views) {
    if (view->data != nullptr) buffers.push_back(buffer_of(*view, name));
  }
  return buffers;
}

/// The spec both row kernels share but for the entry point and role.
detail::KernelSpec row_kernel_spec(const LayerNormConfig& config, const std::string& arch,
                                   const std::string& entry, const std::string& role) {
  detail::KernelSpec spec;
  spec.op = "layernorm";
  spec.header = "layer_norm/layer_norm_backward_kernel.cuh";
  if (role == "layer_norm") spec.header = "layer_norm/layer_norm_kernel.cuh";
  spec.name_expression =
      "flashjit::" + entry + "<flashjit::LayerNormConfig<" + element_type(config.dtype) + ", " +
      std::to_string(config.max_cols) + ", " + std::to_string(config.threads_per_row) + ", " +
      std::to_string(config.vector_width) + ", " + (config.rms ? "true" : "false") + ">>";
  spec.arch = arch;
  spec.role = role;
  spec.traits = {std::string(dtype_name(config.dtype)), config.rms ? "rms" : "ln",
                 config.max_cols ? detail::trait("cols", config.max_cols) : "colsany",
                 detail::trait("t", config.threads_per_row),
                 detail::trait("v", config.vector_width)};
  spec.readable_name = detail::name_of(role, 0, spec.traits);
  spec.threads = config.threads_per_row * space::rows_per_block(config.threads_per_row);
  spec.dynamic_shared_bytes = space::shared_bytes(config.threads_per_row);
  return spec;
}

/// The grid of `units` rows (forward) or slots (backward) of `config`.
detail::LaunchShape row_launch(const LayerNormConfig& config, std::int64_t units, Stream stream) {
  const int rows_per_block = space::rows_per_block(config.threads_per_row);
  const std::int64_t blocks = (units + rows_per_block - 1) / rows_per_block;
  if (blocks > std::numeric_limits<int>::max()) {
    throw InvalidArgument(
        "x.shape",
        "too many rows for one launch (at most " +
            std::to_string(std::int64_t{rows_per_block} * std::numeric_limits<int>::max()) + ")");
  }
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(blocks);
  shape.block_x = static_cast<unsigned>(config.threads_per_row * rows_per_block);
  shape.dynamic_shared_bytes =
      static_cast<std::size_t>(space::shared_bytes(config.threads_per_row));
  shape.stream = static_cast<CUstream>(stream);
  return shape;
}

}  // namespace

std::vector<LayerNormConfig> layer_norm_configs() {
  std::vector<LayerNormConfig> configs;
  for (DType dtype : kDTypes) {
    for (bool rms : {false, true}) {
      for (int max_cols : space::kMaxColsBuckets) {
        for (int threads : space::kThreadsPerRow) {
          for (int width : space::kVectorWidths) {
            if (space::config_valid(max_cols, threads, width)) {
              configs.push_back({dtype, rms, max_cols, threads, width});
            }
          }
        }
      }
    }
  }
  return configs;
}

LayerNormConfig default_layer_norm_config(DType dtype, bool rms, int cols) {
  // 8 cached values a thread keeps loads in flight without the register pressure of 16 (the
  // backward caches x̂ and g and sums three partials per value); the unbounded bucket takes
  // the most threads, as its rows are the longest.
  constexpr int kPreferredValuesPerThread = 8;
  int bucket = 0;
  for (int max_cols : space::kMaxColsBuckets) {
    if (max_cols >= cols) {
      bucket = max_cols;
      break;
    }
  }
  LayerNormConfig choice{dtype, rms, bucket, 0, 1};
  for (int threads : space::kThreadsPerRow) {
    if (!space::config_valid(bucket, threads, 1)) continue;
    choice.threads_per_row = threads;  // ends at the most threads if none is small enough
    if (bucket != 0 && bucket / threads <= kPreferredValuesPerThread) break;
  }
  for (int width : space::kVectorWidths) {
    if (space::config_valid(bucket, choice.threads_per_row, width)) choice.vector_width = width;
  }
  return choice;
}

detail::KernelSpec layer_norm_spec(const LayerNormConfig& config, const std::string& arch) {
  return row_kernel_spec(config, arch, "layer_norm_kernel", "layer_norm");
}

detail::KernelSpec layer_norm_backward_spec(const LayerNormConfig& config,
                                            const std::string& arch) {
  return row_kernel_spec(config, arch, "layer_norm_backward_kernel", "layer_norm_backward");
}

detail::KernelSpec layer_norm_param_grad_spec(DType dtype, const std::string& arch) {
  detail::KernelSpec spec;
  spec.op = "layernorm";
  spec.header = "layer_norm/layer_norm_backward_kernel.cuh";
  spec.name_expression = "flashjit::layer_norm_param_grad_kernel<" + element_type(dtype) + ">";
  spec.arch = arch;
  spec.role = "layer_norm_param_grad";
  spec.traits = {std::string(dtype_name(dtype))};
  spec.readable_name = detail::name_of(spec.role, 0, spec.traits);
  spec.threads = space::kParamGradThreads;
  return spec;
}

LayerNormSlots layer_norm_slots(std::int64_t rows, int cols) {
  const std::int64_t by_workspace = std::max<std::int64_t>(1, space::kWorkspaceFloats / (3 * cols));
  const std::int64_t slots =
      std::max<std::int64_t>(1, std::min({rows, std::int64_t{space::kMaxSlots}, by_workspace}));
  return {static_cast<int>(slots), (rows + slots - 1) / slots};
}

void run_layer_norm(detail::RuntimeBackend& backend, const LayerNorm& options, const TensorView& x,
                    const TensorView& gamma, const TensorView& beta, const TensorView& y,
                    const TensorView& mean, const TensorView& rstd, Stream stream) {
  validate_layer_norm_arguments(options, x, gamma, beta, y, mean, rstd);
  if (x.shape[0] == 0) return;  // no row: nothing to write (cols is at least 1)
  const int cols = static_cast<int>(x.shape[1]);
  const LayerNormConfig config = default_layer_norm_config(x.dtype, options.rms, cols);
  const LayerNormParams params{rows_of(x),
                               rows_of(options.residual),
                               options.bias.data,
                               rows_of(options.sum),
                               gamma.data,
                               beta.data,
                               rows_of(y),
                               stats_of(mean),
                               stats_of(rstd),
                               x.shape[0],
                               cols,
                               options.epsilon};
  const std::vector<detail::KernelBuffer> buffers = buffers_of({{&x, "x"},
                                                                {&options.residual, "residual"},
                                                                {&options.bias, "bias"},
                                                                {&options.sum, "sum"},
                                                                {&gamma, "gamma"},
                                                                {&beta, "beta"},
                                                                {&y, "y"},
                                                                {&mean, "mean"},
                                                                {&rstd, "rstd"}});
  detail::launch_kernel(backend.executor(), layer_norm_spec(config, backend.info().arch()),
                        row_launch(config, x.shape[0], stream), buffers, params);
}

void run_layer_norm_backward(detail::RuntimeBackend& backend, const LayerNorm& options,
                             const TensorView& x, const TensorView& gamma, const TensorView& mean,
                             const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                             const TensorView& dgamma, const TensorView& dbeta,
                             const TensorView& dbias, Stream stream) {
  validate_layer_norm_backward_arguments(options, x, gamma, mean, rstd, dy, dx, dgamma, dbeta,
                                         dbias);
  const std::int64_t rows = x.shape[0];
  const int cols = static_cast<int>(x.shape[1]);
  const LayerNormConfig config = default_layer_norm_config(x.dtype, options.rms, cols);
  const LayerNormSlots slots = layer_norm_slots(rows, cols);
  const DeviceBuffer workspace = backend.allocate_buffer_on_stream(
      sizeof(float) * 3 * static_cast<std::size_t>(slots.slots) * static_cast<std::size_t>(cols),
      stream);
  const LayerNormBackwardParams params{rows_of(x),
                                       gamma.data,
                                       static_cast<const float*>(mean.data),
                                       static_cast<const float*>(rstd.data),
                                       rows_of(dy),
                                       rows_of(dx),
                                       dgamma.data,
                                       dbeta.data,
                                       dbias.data,
                                       static_cast<float*>(workspace.data()),
                                       rows,
                                       cols,
                                       slots.slots,
                                       slots.rows_per_slot};
  std::vector<detail::KernelBuffer> buffers = buffers_of({{&x, "x"},
                                                          {&gamma, "gamma"},
                                                          {&mean, "mean"},
                                                          {&rstd, "rstd"},
                                                          {&dy, "dy"},
                                                          {&dx, "dx"},
                                                          {&dgamma, "dgamma"},
                                                          {&dbeta, "dbeta"},
                                                          {&dbias, "dbias"}});
  buffers.push_back({workspace.data(), workspace.size(), "workspace"});
  const std::string arch = backend.info().arch();
  detail::LaunchShape reduce;
  reduce.grid_x =
      static_cast<unsigned>((cols + space::kParamGradThreads - 1) / space::kParamGradThreads);
  reduce.block_x = static_cast<unsigned>(space::kParamGradThreads);
  reduce.stream = static_cast<CUstream>(stream);
  detail::Executor& executor = backend.executor();
  detail::launch_kernel(executor, layer_norm_backward_spec(config, arch),
                        row_launch(config, slots.slots, stream), buffers, params);  // dx
  detail::launch_kernel(executor, layer_norm_param_grad_spec(x.dtype, arch), reduce, buffers,
                        params);  // dγ, dβ, dbias
}

}  // namespace flashjit::kernels
