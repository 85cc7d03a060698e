// The layer_norm op's launches: each call's config asked of the ConfigChoice (or given, for
// the autotuner's candidates), checked against the call, then the row kernel (and for the
// backward the parameter-gradient kernel) launched.
#include <limits>

#include "autotune/tuning_problem.hpp"
#include "flashjit/error.hpp"
#include "layer_norm/layer_norm.hpp"
#include "layer_norm/layer_norm_params.cuh"
#include "layer_norm/layer_norm_space.cuh"
#include "layer_norm/layer_norm_tuning.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace space = flashjit::layer_norm_space;

namespace {

RowMajor rows_of(const TensorView& view) {
  return {view.data, view.data == nullptr ? 0 : view.strides[0]};
}

/// A [rows] statistic's data and stride (absent: null data).
template <typename T>
RowStatistic<T> statistic_of(const TensorView& view) {
  return {static_cast<T*>(view.data), view.data != nullptr ? view.strides[0] : 0};
}

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

/// Throws InvalidArgument("config") unless `config` runs calls of `dtype`, `rms` and `cols`.
void check_config(const LayerNormConfig& config, DType dtype, bool rms, int cols) {
  if (config.dtype != dtype || config.rms != rms) {
    throw InvalidArgument("config", "is for " + std::string(dtype_name(config.dtype)) +
                                        (config.rms ? " RMS norm" : " layer norm") +
                                        ", not the call's " + std::string(dtype_name(dtype)) +
                                        (rms ? " RMS norm" : " layer norm"));
  }
  if (!layer_norm_covers(config, cols)) {
    throw InvalidArgument("config", "holds rows of at most " + std::to_string(config.max_cols) +
                                        " columns; the call's have " + std::to_string(cols));
  }
}

/// The forward's launch of validated, non-empty arguments.
void launch_layer_norm(detail::RuntimeBackend& backend, const LayerNorm& options,
                       const TensorView& x, const TensorView& gamma, const TensorView& beta,
                       const TensorView& y, const TensorView& mean, const TensorView& rstd,
                       const LayerNormConfig& config, Stream stream) {
  const int cols = static_cast<int>(x.shape[1]);
  check_config(config, x.dtype, options.rms, cols);
  const LayerNormParams params{rows_of(x),
                               rows_of(options.residual),
                               options.bias.data,
                               rows_of(options.sum),
                               gamma.data,
                               beta.data,
                               rows_of(y),
                               statistic_of<float>(mean),
                               statistic_of<float>(rstd),
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

/// The backward's launches (row kernel, then parameter gradients) of validated arguments.
void launch_layer_norm_backward(detail::RuntimeBackend& backend, const LayerNorm& options,
                                const TensorView& x, const TensorView& gamma,
                                const TensorView& mean, const TensorView& rstd,
                                const TensorView& dy, const TensorView& dx,
                                const TensorView& dgamma, const TensorView& dbeta,
                                const TensorView& dbias, const LayerNormBackwardConfig& config,
                                Stream stream) {
  const std::int64_t rows = x.shape[0];
  const int cols = static_cast<int>(x.shape[1]);
  check_config(config.row, x.dtype, options.rms, cols);
  const LayerNormSlots slots = layer_norm_slots(rows, cols);
  const DeviceBuffer workspace = backend.allocate_buffer_on_stream(
      sizeof(float) * 3 * static_cast<std::size_t>(slots.slots) * static_cast<std::size_t>(cols),
      stream);
  const LayerNormBackwardParams params{rows_of(x),
                                       gamma.data,
                                       statistic_of<const float>(mean),
                                       statistic_of<const float>(rstd),
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
  detail::launch_kernel(executor, layer_norm_backward_spec(config.row, arch),
                        row_launch(config.row, slots.slots, stream), buffers, params);  // dx
  detail::launch_kernel(executor, layer_norm_param_grad_spec(x.dtype, arch), reduce, buffers,
                        params);  // dγ, dβ, dbias
}

}  // namespace

void run_layer_norm(detail::RuntimeBackend& backend, ConfigChoice& choice, const LayerNorm& options,
                    const TensorView& x, const TensorView& gamma, const TensorView& beta,
                    const TensorView& y, const TensorView& mean, const TensorView& rstd,
                    Stream stream) {
  validate_layer_norm_arguments(options, x, gamma, beta, y, mean, rstd);
  if (x.shape[0] == 0) return;  // no row: nothing to write (cols is at least 1)
  const LayerNormConfig config = choice.choose_as<LayerNormConfig>(
      LayerNormProblem(false, x.dtype, layer_norm_shape(options, x)));
  launch_layer_norm(backend, options, x, gamma, beta, y, mean, rstd, config, stream);
}

void run_layer_norm_backward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                             const LayerNorm& options, const TensorView& x, const TensorView& gamma,
                             const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                             const TensorView& dx, const TensorView& dgamma,
                             const TensorView& dbeta, const TensorView& dbias, Stream stream) {
  validate_layer_norm_backward_arguments(options, x, gamma, mean, rstd, dy, dx, dgamma, dbeta,
                                         dbias);
  const LayerNormBackwardConfig config = choice.choose_as<LayerNormBackwardConfig>(
      LayerNormProblem(true, x.dtype, layer_norm_shape(options, x, dbias)));
  launch_layer_norm_backward(backend, options, x, gamma, mean, rstd, dy, dx, dgamma, dbeta, dbias,
                             config, stream);
}

void layer_norm(detail::RuntimeBackend& backend, const LayerNorm& options, const TensorView& x,
                const TensorView& gamma, const TensorView& beta, const TensorView& y,
                const TensorView& mean, const TensorView& rstd, const LayerNormConfig& config,
                Stream stream) {
  validate_layer_norm_arguments(options, x, gamma, beta, y, mean, rstd);
  if (x.shape[0] == 0) return;
  launch_layer_norm(backend, options, x, gamma, beta, y, mean, rstd, config, stream);
}

void layer_norm_backward(detail::RuntimeBackend& backend, const LayerNorm& options,
                         const TensorView& x, const TensorView& gamma, const TensorView& mean,
                         const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                         const TensorView& dgamma, const TensorView& dbeta, const TensorView& dbias,
                         const LayerNormBackwardConfig& config, Stream stream) {
  validate_layer_norm_backward_arguments(options, x, gamma, mean, rstd, dy, dx, dgamma, dbeta,
                                         dbias);
  launch_layer_norm_backward(backend, options, x, gamma, mean, rstd, dy, dx, dgamma, dbeta, dbias,
                             config, stream);
}

}  // namespace flashjit::kernels