// The layer_norm op's launches: each call's config asked of the ConfigChoice (or given, for
// the autotuner's candidates), checked against the call, then the row kernel (and for the
// backward the parameter-gradient kernel) launched.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

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

/// Whether every [rows, cols] and [cols] tensor among `views` takes `width`-element vectors of
/// `dtype`: cols a multiple of the width, data and row strides aligned to the vector's bytes.
bool vectors_fit(int width, DType dtype, int cols, std::initializer_list<const TensorView*> views) {
  if (width == 1) return true;
  const auto bytes =
      static_cast<std::int64_t>(width) * static_cast<std::int64_t>(dtype_size(dtype));
  if (cols % width != 0) return false;
  for (const TensorView* view : views) {
    if (view->data == nullptr) continue;
    if (reinterpret_cast<std::uintptr_t>(view->data) % static_cast<std::uintptr_t>(bytes) != 0) {
      return false;
    }
    if (view->rank == 2 &&
        view->strides[0] * static_cast<std::int64_t>(dtype_size(dtype)) % bytes != 0) {
      return false;
    }
  }
  return true;
}

/// `config`, with single-element accesses when the call's tensors do not take its vectors (a
/// view at an odd offset, a row stride that is not a multiple of 16 bytes).
LayerNormConfig for_alignment(LayerNormConfig config, int cols,
                              std::initializer_list<const TensorView*> views) {
  if (!vectors_fit(config.vector_width, config.dtype, cols, views)) config.vector_width = 1;
  return config;
}

/// The persistent grid of `spec` (of `config`) over `rows` with `shared_bytes` per block:
/// `per_sm` blocks on every SM (fewer where shared memory runs out), at most one per group of
/// rows_per_block rows; with `cluster` > 1, whole clusters of that many blocks, each sharing its
/// rows, and no more than the executor says are resident at once: a cluster's blocks share one
/// GPC, so a GPU may hold fewer than its SMs' blocks over the cluster size, and a cluster past
/// those would run after the others, doubling the time.
detail::LaunchShape row_launch(detail::Executor& executor, const detail::KernelSpec& spec,
                               const DeviceInfo& device, const LayerNormConfig& config,
                               std::int64_t rows, int per_sm_wanted, std::size_t shared_bytes,
                               int cluster, Stream stream) {
  const int rows_per_block = space::rows_per_block(config.threads_per_row);
  const int block_threads = config.threads_per_row * rows_per_block;
  std::int64_t per_sm = per_sm_wanted;
  if (shared_bytes > 0) {
    per_sm = std::min<std::int64_t>(
        per_sm, std::max<std::int64_t>(
                    1, static_cast<std::int64_t>(device.shared_memory_optin / shared_bytes)));
  }
  detail::LaunchShape shape;
  shape.block_x = static_cast<unsigned>(block_threads);
  shape.cluster_x = static_cast<unsigned>(cluster);
  shape.dynamic_shared_bytes = shared_bytes;
  shape.stream = static_cast<CUstream>(stream);
  std::int64_t resident = std::max<std::int64_t>(1, device.sm_count * per_sm / cluster);
  if (cluster > 1) {
    const int at_once = executor.resident_clusters(spec, shape);
    if (at_once > 0) resident = std::min<std::int64_t>(resident, at_once);
  }
  const std::int64_t groups = (rows + rows_per_block - 1) / rows_per_block;
  shape.grid_x =
      static_cast<unsigned>(std::max<std::int64_t>(1, std::min(groups, resident)) * cluster);
  return shape;
}

int spec_threads(const LayerNormConfig& config) {
  return config.threads_per_row * space::rows_per_block(config.threads_per_row);
}

/// How the unbounded config holds a row: the blocks of a cluster that share it (1: none) and
/// the stash of each (its chunk of the columns).
struct RowSplit {
  int cluster = 1;
  int stash = 0;
};

/// The cluster sizes to try for `config` on `device`, smallest first: 1, then those of
/// layer_norm_space::kClusterSizes where the config has cluster-split kernels and the device
/// runs them.
std::vector<int> cluster_sizes(const DeviceInfo& device, const LayerNormConfig& config) {
  std::vector<int> sizes = {1};
  if (layer_norm_clusters(config, device.arch())) {
    sizes.insert(sizes.end(), std::begin(space::kClusterSizes), std::end(space::kClusterSizes));
  }
  return sizes;
}

/// Shared memory a block of `config` has for its stash in a cluster of `cluster`.
std::size_t stash_budget(const DeviceInfo& device, const LayerNormConfig& config, int cluster) {
  return device.shared_memory_optin -
         static_cast<std::size_t>(space::merge_bytes(config.threads_per_row) +
                                  space::exchange_bytes(cluster));
}

/// The forward's split for the unbounded config: the smallest cluster (none first) whose
/// blocks each hold their chunk of the row and of the [cols] vectors; where none does, one
/// block with the row alone if it fits, else nothing (the row read again for each pass).
RowSplit forward_split(const DeviceInfo& device, const LayerNormConfig& config, int cols,
                       int vectors) {
  if (config.max_cols != 0) return {};
  const auto element = static_cast<int>(dtype_size(config.dtype));
  for (int cluster : cluster_sizes(device, config)) {
    const int chunk = space::cluster_chunk(cols, cluster, config.vector_width);
    const auto bytes = space::stash_bytes(chunk, element, vectors, space::kStashRowAndVectors);
    if (static_cast<std::size_t>(bytes) <= stash_budget(device, config, cluster)) {
      return {cluster, space::kStashRowAndVectors};
    }
  }
  const bool row_fits =
      static_cast<std::size_t>(space::stash_bytes(cols, element, vectors, space::kStashRow)) <=
      stash_budget(device, config, 1);
  return {1, row_fits ? space::kStashRow : space::kStashNone};
}

/// The backward's split for the unbounded config: the smallest cluster (none first) whose
/// blocks each hold their chunk of the partial sums, x, dy and γ; where none does, one block
/// with the stash bits that fit, in the order they save the most bytes: the partials (a read
/// and a write of each per row), then x and dy (read again), then γ.
RowSplit backward_split(const DeviceInfo& device, const LayerNormConfig& config, int cols,
                        int planes) {
  if (config.max_cols != 0) return {};
  const auto element = static_cast<int>(dtype_size(config.dtype));
  constexpr int kAll = space::kStashPartials | space::kStashRows | space::kStashGamma;
  for (int cluster : cluster_sizes(device, config)) {
    const int chunk = space::cluster_chunk(cols, cluster, config.vector_width);
    const auto bytes = space::backward_stash_bytes(chunk, element, planes, kAll);
    if (static_cast<std::size_t>(bytes) <= stash_budget(device, config, cluster)) {
      return {cluster, kAll};
    }
  }
  RowSplit split;
  for (int bit : {space::kStashPartials, space::kStashRows, space::kStashGamma}) {
    const int bytes = space::backward_stash_bytes(cols, element, planes, split.stash | bit);
    if (static_cast<std::size_t>(bytes) <= stash_budget(device, config, 1)) split.stash |= bit;
  }
  return split;
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
                       const LayerNormConfig& chosen, Stream stream) {
  const int cols = static_cast<int>(x.shape[1]);
  check_config(chosen, x.dtype, options.rms, cols);
  const LayerNormConfig config = for_alignment(
      chosen, cols, {&x, &options.residual, &options.bias, &options.sum, &gamma, &beta, &y});
  const DeviceInfo& device = backend.info();
  // The stash keeps γ, β and the bias at their own places (0, 1, 2): as many slots as the last.
  const int vectors = options.bias.data != nullptr ? 3 : beta.data != nullptr ? 2 : 1;
  const RowSplit split = forward_split(device, config, cols, vectors);
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
                               options.epsilon,
                               split.stash};
  const std::vector<detail::KernelBuffer> buffers = buffers_of({{&x, "x"},
                                                                {&options.residual, "residual"},
                                                                {&options.bias, "bias"},
                                                                {&options.sum, "sum"},
                                                                {&gamma, "gamma"},
                                                                {&beta, "beta"},
                                                                {&y, "y"},
                                                                {&mean, "mean"},
                                                                {&rstd, "rstd"}});
  const int chunk = space::cluster_chunk(cols, split.cluster, config.vector_width);
  const auto shared = static_cast<std::size_t>(
      config.shared_bytes() + space::exchange_bytes(split.cluster) +
      space::stash_bytes(chunk, static_cast<int>(dtype_size(config.dtype)), vectors, split.stash));
  detail::Executor& executor = backend.executor();
  const detail::KernelSpec spec = layer_norm_spec(config, device.arch(), split.cluster);
  detail::launch_kernel(
      executor, spec,
      row_launch(executor, spec, device, config, x.shape[0],
                 space::forward_blocks_per_sm(spec_threads(config)), shared, split.cluster, stream),
      buffers, params);
}

/// The backward's launches (row kernel, then parameter gradients) of validated arguments.
void launch_layer_norm_backward(detail::RuntimeBackend& backend, const LayerNorm& options,
                                const TensorView& x, const TensorView& gamma,
                                const TensorView& mean, const TensorView& rstd,
                                const TensorView& dy, const TensorView& dx,
                                const TensorView& dgamma, const TensorView& dbeta,
                                const TensorView& dbias, const LayerNormBackwardConfig& chosen,
                                Stream stream) {
  const std::int64_t rows = x.shape[0];
  const int cols = static_cast<int>(x.shape[1]);
  check_config(chosen.row, x.dtype, options.rms, cols);
  const LayerNormConfig config =
      for_alignment(chosen.row, cols, {&x, &gamma, &dy, &dx, &dgamma, &dbeta, &dbias});
  const DeviceInfo& device = backend.info();
  const int planes = 1 + (dbeta.data != nullptr ? 1 : 0) + (dbias.data != nullptr ? 1 : 0);
  const RowSplit split = backward_split(device, config, cols, planes);
  const int chunk = space::cluster_chunk(cols, split.cluster, config.vector_width);
  const auto shared = static_cast<std::size_t>(
      space::merge_bytes(config.threads_per_row) + space::exchange_bytes(split.cluster) +
      space::partials_bytes(config.max_cols, config.threads_per_row) +
      space::backward_stash_bytes(chunk, static_cast<int>(dtype_size(config.dtype)), planes,
                                  split.stash));
  const std::string arch = device.arch();
  detail::Executor& executor = backend.executor();
  const detail::KernelSpec row_spec = layer_norm_backward_spec(config, arch, split.cluster);
  const detail::LaunchShape row_shape =
      row_launch(executor, row_spec, device, config, rows, space::kBackwardBlocksPerSm, shared,
                 split.cluster, stream);
  const unsigned groups = row_shape.grid_x / row_shape.cluster_x;  // one partial each
  const DeviceBuffer workspace = backend.allocate_buffer_on_stream(
      sizeof(float) * static_cast<std::size_t>(planes) * groups * static_cast<std::size_t>(cols),
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
                                       static_cast<int>(groups),
                                       split.stash};
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
  detail::LaunchShape reduce;
  reduce.grid_x =
      static_cast<unsigned>((cols + space::kParamGradCols - 1) / space::kParamGradCols);
  reduce.block_x = static_cast<unsigned>(space::kParamGradThreads);
  reduce.dynamic_shared_bytes = space::kParamGradSharedBytes;
  reduce.stream = static_cast<CUstream>(stream);
  detail::launch_kernel(executor, row_spec, row_shape, buffers,
                        params);  // dx and the blocks' partials
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