#pragma once
// The inputs and outputs the tuner runs each candidate on: random inputs in the runtime's
// memory, laid out as the problem's calls have them (each op makes its own:
// TuningProblem::workspace), and the op's outputs read back to check each candidate against the
// default.
#include <memory>
#include <random>
#include <vector>

#include "autotune/tuned_config.hpp"
#include "flashjit/device_buffer.hpp"
#include "flashjit/tensor.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::autotune {

/// One problem's tensors, run by any config of its op.
class TuningWorkspace {
 public:
  virtual ~TuningWorkspace() = default;
  /// Runs `config` (a config of the problem's op) once on `stream`.
  virtual void run(const TunedConfig& config, Stream stream) = 0;
  /// The op's outputs as floats (O; or dQ, dK and dV one after the other; a layer norm's every
  /// output), after a run.
  virtual std::vector<float> outputs() = 0;
};

/// A buffer in the runtime's memory.
struct WorkspaceTensor {
  DeviceBuffer buffer;
  TensorView view;
};

/// `count` elements of `dtype` (f16, bf16, or e4m3 at a byte each) in the runtime's memory:
/// standard normal values from `rng` when `random`, else zeros.
DeviceBuffer upload_16bit(detail::RuntimeBackend& backend, DType dtype, std::int64_t count,
                          std::mt19937_64& rng, bool random);

/// The f16 or bf16 elements of `buffer` as floats.
std::vector<float> read_16bit(detail::RuntimeBackend& backend, const DeviceBuffer& buffer,
                              DType dtype);

}  // namespace flashjit::autotune
