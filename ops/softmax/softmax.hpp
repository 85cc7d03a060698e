#pragma once
// Host side of the row-wise softmax op: configs, specs, argument validation, launch.
#include <string>
#include <vector>

#include "flashjit/dtype.hpp"
#include "flashjit/tensor.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// One point of the softmax config space (ops/softmax/softmax_space.cuh).
struct SoftmaxConfig {
  DType dtype = DType::f32;
  int max_cols = 0;  ///< row-length bucket; 0 handles any length
  int threads_per_row = 32;
};

/// Every valid config of the space, for every dtype, in a fixed order.
std::vector<SoftmaxConfig> softmax_configs();

/// The heuristic config for rows of `cols` columns: the smallest bucket that holds the row,
/// with the fewest threads that keep at most 4 values per thread (else the most threads).
SoftmaxConfig default_softmax_config(DType dtype, int cols);

/// The kernel spec of `config` for target `arch`.
detail::KernelSpec softmax_spec(const SoftmaxConfig& config, const std::string& arch);

/// Checks softmax's arguments (see Runtime::softmax); throws InvalidArgument naming the first
/// bad one ("x", "y.dtype", "x.shape", ...).
void validate_softmax_arguments(const TensorView& x, const TensorView& y, float scale);

/// Runtime::softmax on `backend`: validates (nothing launched on bad input), then launches the
/// heuristic config for the row length.
void run_softmax(detail::RuntimeBackend& backend, const TensorView& x, const TensorView& y,
                 float scale, Stream stream);

}  // namespace flashjit::kernels
