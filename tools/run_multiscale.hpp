#pragma once
// `flashjit run --op multiscale`: a multi-scale attention (retention) forward and
// backward on random inputs, judged against the float64 reference exactly as the tests judge it
// (multiscale/multiscale_case).
#include "flashjit/runtime.hpp"
#include "multiscale/multiscale_case.hpp"

namespace flashjit::tools {

/// Runs forward and backward of `c` on `runtime` (the mask tensor's gradient too), prints the
/// shape, the kernels, each output's errors and PASS or FAIL; returns the exit code (1 on FAIL).
int run_multiscale_op(Runtime& runtime, testing::MultiScaleCase c);

}  // namespace flashjit::tools
