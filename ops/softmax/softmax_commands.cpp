// softmax's part of the `flashjit` command: `run --op softmax`, a row-wise softmax of --rows x
// --cols on random inputs (rows strided), judged against the float64 softmax exactly as the
// tests judge it (softmax_case). The op picks its config by rule, so it has nothing to tune.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "flashjit/error.hpp"
#include "format.hpp"
#include "op_commands.hpp"
#include "run_support.hpp"
#include "softmax/softmax.hpp"
#include "softmax/softmax_case.hpp"
#include "work_report.hpp"

namespace flashjit::tools {
namespace {

/// The case of the run options, checked before anything runs.
testing::SoftmaxCase run_case(const RunContext& context) {
  testing::SoftmaxCase c;
  c.rows = context.shape.rows;
  c.cols = context.shape.cols;
  c.dtype = parse_dtype(context.basics.dtype, "--dtype");
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 26;  // host float64 copies: ~1 GiB
  if (c.rows > kMaxElements / c.cols) {
    throw InvalidArgument("--rows", "rows x cols must be at most 2^26 for a checked run");
  }
  return c;
}

int run_softmax(const RunContext& context) {
  const testing::SoftmaxCase c = run_case(context);
  Runtime runtime = context.open_runtime();
  std::printf("shape:   %lld rows x %lld cols (row stride %lld), %s, scale %g\n",
              static_cast<long long>(c.rows), static_cast<long long>(c.cols),
              static_cast<long long>(c.cols + 3), std::string(dtype_name(c.dtype)).c_str(),
              double(c.scale));
  const kernels::SoftmaxConfig config =
      kernels::default_softmax_config(c.dtype, static_cast<int>(c.cols));
  std::printf("kernel:  %s\n",
              kernels::softmax_spec(config, runtime.device().arch()).display_name().c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const testing::SoftmaxVerdict verdict = testing::run_softmax_case(runtime, c);
  const double elapsed = elapsed_ms(start);
  std::printf("y:       max abs error %.3g, relative L2 error %.3g (bound %.3g)\n",
              verdict.y.max_abs, verdict.y.rel_l2, verdict.tolerance);
  // x read once and y written once.
  report_work(context, runtime, "softmax",
              {0, 2.0 * double(c.rows) * double(c.cols) * double(dtype_size(c.dtype))});
  return conclude(verdict.ok, verdict.describe(), "kernel and check", elapsed);
}

}  // namespace

OpCommands softmax_commands() {
  RunOp run;
  run.name = "softmax";
  run.takes_fp32 = true;
  run.help = "a row-wise softmax of --rows x --cols (--dtype fp32 too)";
  run.options = {"--rows", "--cols", "--counters"};
  run.run = run_softmax;
  OpCommands commands;
  commands.runs = {run};
  return commands;
}

}  // namespace flashjit::tools
