#pragma once
// `flashjit run --op layer-norm`: a layer norm (or RMS norm) forward and backward on random
// inputs, judged against the float64 reference exactly as the tests judge it
// (layer_norm/layer_norm_case).
#include <cstdint>
#include <string>

#include "flashjit/runtime.hpp"

namespace flashjit::tools {

struct LayerNormRun {
  std::int64_t rows = 64;
  std::int64_t cols = 1024;
  std::string dtype = "bf16";
  bool rms = false;
  bool bias = false;
  bool residual = false;
  std::uint64_t seed = 1;
};

/// Throws InvalidArgument naming the flag ("--cols", "--dtype", ...) for a run the op refuses,
/// before anything runs.
void check_layer_norm_run(const LayerNormRun& run);

/// Runs forward and backward of `run` on `runtime`, prints the shape, the kernels, each
/// output's errors and PASS or FAIL; returns the exit code (1 on FAIL).
int run_layer_norm_op(Runtime& runtime, const LayerNormRun& run);

}  // namespace flashjit::tools
