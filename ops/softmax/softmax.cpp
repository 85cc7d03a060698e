#include "softmax/softmax.hpp"

#include <cmath>
#include <limits>
#include <numbers>

#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"
#include "runtime/executor.hpp"
#include "softmax/softmax_space.cuh"

namespace flashjit::kernels {
namespace space = flashjit::softmax_space;

std::vector<SoftmaxConfig> softmax_configs() {
  std::vector<SoftmaxConfig> configs;
  for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
    for (int max_cols : space::kMaxColsBuckets) {
      for (int threads : space::kThreadsPerRow) {
        if (space::config_valid(max_cols, threads)) configs.push_back({dtype, max_cols, threads});
      }
    }
  }
  return configs;
}

SoftmaxConfig default_softmax_config(DType dtype, int cols) {
  // Small rows favour few threads per row (more rows per block, no block barrier); 4 cached
  // values per thread keeps loads in flight without register pressure.
  constexpr int kPreferredValuesPerThread = 4;
  int bucket = 0;
  for (int max_cols : space::kMaxColsBuckets) {
    if (max_cols >= cols) {
      bucket = max_cols;
      break;
    }
  }
  SoftmaxConfig choice{dtype, bucket, 0};
  for (int threads : space::kThreadsPerRow) {
    if (!space::config_valid(bucket, threads)) continue;
    choice.threads_per_row = threads;  // ends at the most threads if none is small enough
    if (bucket != 0 && bucket / threads <= kPreferredValuesPerThread) break;
  }
  return choice;
}

detail::KernelSpec softmax_spec(const SoftmaxConfig& config, const std::string& arch) {
  static const char* kElementTypes[] = {"flashjit::half_t", "flashjit::bfloat16_t", "float"};
  const std::string element = kElementTypes[static_cast<int>(config.dtype)];
  detail::KernelSpec spec;
  spec.op = "softmax";
  spec.header = "softmax/softmax_kernel.cuh";
  spec.name_expression = "flashjit::softmax_kernel<flashjit::SoftmaxConfig<" + element + ", " +
                         std::to_string(config.max_cols) + ", " +
                         std::to_string(config.threads_per_row) + ">>";
  spec.arch = arch;
  spec.role = "softmax";
  spec.traits = {std::string(dtype_name(config.dtype)),
                 config.max_cols ? detail::trait("cols", config.max_cols) : "colsany",
                 detail::trait("t", config.threads_per_row)};
  spec.readable_name = detail::name_of("softmax", 0, spec.traits);
  spec.threads = config.threads_per_row * softmax_space::rows_per_block(config.threads_per_row);
  spec.dynamic_shared_bytes = softmax_space::shared_bytes(config.threads_per_row);
  return spec;
}

void validate_softmax_arguments(const TensorView& x, const TensorView& y, float scale) {
  check_tensor(x, "x", 2);
  check_tensor(y, "y", 2);
  check_same_dtype(y, x, "y", "x");
  if (y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1]) {
    throw InvalidArgument("y.shape", "must equal x.shape [" + std::to_string(x.shape[0]) + ", " +
                                         std::to_string(x.shape[1]) + "]");
  }
  auto check_row_layout = [](const TensorView& view, const std::string& name) {
    if (view.strides[1] != 1) {
      throw InvalidArgument(name + ".strides",
                            "the column stride must be 1 (rows may have any stride)");
    }
    if (view.strides[0] < view.shape[1]) {
      throw InvalidArgument(name + ".strides",
                            "the row stride must be at least the number of columns");
    }
  };
  check_row_layout(x, "x");
  check_row_layout(y, "y");
  if (x.shape[1] > std::numeric_limits<int>::max()) {
    throw InvalidArgument("x.shape", "rows of more than 2^31 - 1 columns are not supported");
  }
  check_no_partial_overlap(y, x, "y", "x");
  if (!std::isfinite(scale)) throw InvalidArgument("scale", "must be finite");
}

void run_softmax(detail::RuntimeBackend& backend, const TensorView& x, const TensorView& y,
                 float scale, Stream stream) {
  validate_softmax_arguments(x, y, scale);
  if (x.numel() == 0) return;  // no rows, or rows of no columns: nothing to write
  const int cols = static_cast<int>(x.shape[1]);
  const SoftmaxConfig config = default_softmax_config(x.dtype, cols);
  detail::LaunchShape shape;
  const int rows_per_block = softmax_space::rows_per_block(config.threads_per_row);
  const std::int64_t blocks = (x.shape[0] + rows_per_block - 1) / rows_per_block;
  if (blocks > std::numeric_limits<int>::max()) {
    throw InvalidArgument(
        "x.shape",
        "too many rows for one launch (at most " +
            std::to_string(std::int64_t{rows_per_block} * std::numeric_limits<int>::max()) + ")");
  }
  shape.grid_x = static_cast<unsigned>(blocks);
  shape.block_x = static_cast<unsigned>(config.threads_per_row * rows_per_block);
  shape.dynamic_shared_bytes =
      static_cast<std::size_t>(softmax_space::shared_bytes(config.threads_per_row));
  shape.stream = static_cast<CUstream>(stream);
  const float scale_log2 = scale * std::numbers::log2e_v<float>;
  // Argument types match the kernel's parameters exactly: (const T*, T*, index_t, int,
  // index_t, index_t, float).
  using index_t = long long;
  const std::vector<detail::KernelBuffer> buffers = {
      {x.data, static_cast<std::size_t>(x.span_bytes()), "x"},
      {y.data, static_cast<std::size_t>(y.span_bytes()), "y"}};
  detail::launch_kernel(backend.executor(), softmax_spec(config, backend.info().arch()), shape,
                        buffers, x.data, y.data, index_t{x.shape[0]}, cols, index_t{x.strides[0]},
                        index_t{y.strides[0]}, scale_log2);
}

}  // namespace flashjit::kernels
