#include "run_layer_norm.hpp"

#include <chrono>
#include <cstdio>

#include "chosen_kernels.hpp"
#include "flashjit/error.hpp"
#include "format.hpp"
#include "layer_norm/layer_norm_case.hpp"
#include "layer_norm/layer_norm_space.cuh"
#include "layer_norm/layer_norm_tuning.hpp"

namespace flashjit::tools {
namespace {

testing::LayerNormCase case_of(const LayerNormRun& run) {
  testing::LayerNormCase c;
  c.rows = run.rows;
  c.cols = run.cols;
  c.dtype = parse_dtype(run.dtype, "--dtype");
  c.rms = run.rms;
  c.bias = run.bias;
  c.residual = run.residual;
  c.seed = run.seed;
  return c;
}

void print_checks(const testing::LayerNormVerdict& verdict) {
  for (const reference::CheckResult& check : verdict.checks) {
    std::printf("  %s\n", check.describe().substr(0, check.describe().find('\n')).c_str());
  }
}

}  // namespace

void check_layer_norm_run(const LayerNormRun& run) {
  if (run.cols < 1 || run.cols > layer_norm_space::kMaxCols) {
    throw InvalidArgument("--cols",
                          "must be from 1 to " + std::to_string(layer_norm_space::kMaxCols));
  }
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 26;  // host float64 copies: ~4 GiB
  if (run.rows > kMaxElements / run.cols) {
    throw InvalidArgument("--rows", "rows x cols must be at most 2^26 for a checked run");
  }
  case_of(run);  // the dtype
}

int run_layer_norm_op(Runtime& runtime, const LayerNormRun& run) {
  const testing::LayerNormCase c = case_of(run);
  std::printf("shape:   %lld rows x %lld cols, %s, %s%s%s\n", static_cast<long long>(c.rows),
              static_cast<long long>(c.cols), std::string(dtype_name(c.dtype)).c_str(),
              c.rms ? "RMS norm" : "layer norm", c.bias ? ", + bias" : "",
              c.residual ? ", + residual" : "");
  // As the tuning policy chooses them for the calls below (which then find the choice memoized).
  kernels::LayerNormProblem problem(false, c.dtype,
                                    {c.rows, static_cast<int>(c.cols), c.rms, c.bias, c.residual});
  const std::string forward_kernels = chosen_kernels(runtime, problem);
  problem.backward = true;
  problem.norm.residual = false;  // the backward's call: dbias written for a fused bias
  std::printf("kernel:  %s; %s\n", forward_kernels.c_str(),
              chosen_kernels(runtime, problem).c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const testing::LayerNormVerdict forward = testing::run_layer_norm_case(runtime, c);
  const testing::LayerNormVerdict backward = testing::run_layer_norm_backward_case(runtime, c);
  const double elapsed =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("forward (relative L2 bound %.3g for y):\n", forward.bound);
  print_checks(forward);
  std::printf("backward (relative L2 bound %.3g):\n", backward.bound);
  print_checks(backward);
  if (!forward.ok || !backward.ok) {
    std::printf("FAIL: the result does not match the float64 reference\n%s\n%s\n",
                forward.describe().c_str(), backward.describe().c_str());
    return 1;
  }
  std::printf("PASS: matches the float64 reference (forward, backward and check in %s)\n",
              format_duration_ms(elapsed).c_str());
  return 0;
}

}  // namespace flashjit::tools
