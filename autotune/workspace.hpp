#pragma once
// The inputs and outputs the tuner runs each candidate on: random inputs in the runtime's
// memory, laid out as the problem's calls have them (a dense batch, a paged KV cache for
// attention-decode, a layer norm's rows), and the op's outputs read back to check each
// candidate against the default.
#include <memory>
#include <random>
#include <vector>

#include "autotune/candidates.hpp"
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

/// The workspace of `problem` on `backend` (which must outlive it). For the backward it runs
/// the default forward once, for the O and LSE the backward reads.
std::unique_ptr<TuningWorkspace> make_workspace(detail::RuntimeBackend& backend,
                                                const TuningProblem& problem);

/// A buffer in the runtime's memory.
struct WorkspaceTensor {
  DeviceBuffer buffer;
  TensorView view;
};

/// `count` elements of `dtype` (f16 or bf16) in the runtime's memory: standard normal values
/// from `rng` when `random`, else zeros.
DeviceBuffer upload_16bit(detail::RuntimeBackend& backend, DType dtype, std::int64_t count,
                          std::mt19937_64& rng, bool random);

/// The f16 or bf16 elements of `buffer` as floats.
std::vector<float> read_16bit(detail::RuntimeBackend& backend, const DeviceBuffer& buffer,
                              DType dtype);

/// The layer norm ops' workspace (layer_norm_workspace.cpp): x, gamma, beta and the fused
/// adds' inputs at random, the outputs a training step writes; for the backward, dy at random
/// and the default forward's mean and rstd.
std::unique_ptr<TuningWorkspace> make_layer_norm_workspace(detail::RuntimeBackend& backend,
                                                           const TuningProblem& problem);

/// The multi-scale ops' workspace (multiscale_workspace.cpp): q, k, v at random, RetNet's decay
/// rates or a random mask tensor; for the backward, dO at random and the default forward's o and
/// r.
std::unique_ptr<TuningWorkspace> make_multiscale_workspace(detail::RuntimeBackend& backend,
                                                           const TuningProblem& problem);

/// attention-decode's workspace (decode_workspace.cpp): a paged cache with a shuffled page
/// table, or a dense one, every sequence of the full context.
std::unique_ptr<TuningWorkspace> make_decode_workspace(detail::RuntimeBackend& backend,
                                                       const TuningProblem& problem);

}  // namespace flashjit::autotune
