// merge-states' part of the `flashjit` command: `run --op merge-states`, the keys of an
// attention problem split into --partials random ranges, their fp32 partial states (what
// split-KV writes) merged into --dtype and checked against the unsplit attention, exactly as
// the tests judge it (merge_states_case). The op is not tuned.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "flashjit/error.hpp"
#include "merge_states/merge_states.hpp"
#include "merge_states/merge_states_case.hpp"
#include "merge_states/merge_states_space.cuh"
#include "op_commands.hpp"
#include "run_support.hpp"
#include "work_report.hpp"

namespace flashjit::tools {
namespace {

/// The case of the run options, checked before anything runs: the sizes as attention's, the
/// dtype (any) and head dim (to kMaxHeadDim) the merge's own.
testing::MergeStatesCase merge_states_case(const RunContext& context, int partials) {
  if (context.shape.head_dim > merge_states_space::kMaxHeadDim) {
    throw InvalidArgument("--head-dim",
                          "must be from 1 to " + std::to_string(merge_states_space::kMaxHeadDim));
  }
  testing::MergeStatesCase c;
  RunShape sizes = context.shape;
  sizes.head_dim = 64;  // a head dim the attention's checks accept; the merge's is checked above
  c.problem = checked_problem(sizes);
  c.problem.head_dim = context.shape.head_dim;
  c.partials = partials;
  c.output = parse_dtype(context.basics.dtype, "--dtype");
  c.seed = context.basics.seed;
  return c;
}

int run_merge_states(const RunContext& context, int partials) {
  const testing::MergeStatesCase c = merge_states_case(context, partials);
  Runtime runtime = context.open_runtime();
  const reference::Problem& p = c.problem;
  std::printf(
      "shape:   %d partials of %lld tokens x %lld heads x head_dim %lld (keys of a "
      "%lld x %lld%s attention split at random), fp32 into %s\n",
      c.partials, static_cast<long long>(p.batch * p.seqlen_q), static_cast<long long>(p.heads_q),
      static_cast<long long>(p.head_dim), static_cast<long long>(p.seqlen_q),
      static_cast<long long>(p.seqlen_k), p.causal ? " causal" : "",
      std::string(dtype_name(c.output)).c_str());
  const kernels::MergeStatesConfig config =
      kernels::default_merge_states_config(c.input, c.output, static_cast<int>(p.head_dim), false);
  std::printf("kernel:  %s\n",
              kernels::merge_states_spec(config, runtime.device().arch()).display_name().c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const testing::MergeStatesVerdict verdict = testing::run_merge_states_case(runtime, c);
  const double elapsed = elapsed_ms(start);
  std::printf(
      "O:       max abs error %.3g, relative L2 error %.3g against the unsplit attention "
      "(bound %.3g: float32 and %s rounding)\n",
      verdict.out.max_abs, verdict.out.rel_l2, verdict.bound,
      std::string(dtype_name(c.output)).c_str());
  std::printf("LSE:     max abs error %.3g, relative L2 error %.3g (natural log)\n",
              verdict.lse.max_abs, verdict.lse.rel_l2);
  // Each partial's O and LSE read once; the merged O and LSE written once.
  const double rows = double(p.batch * p.seqlen_q) * double(p.heads_q);
  const double head_dim = double(p.head_dim);
  report_work(context, runtime, "merge_states",
              {0, rows * c.partials * (head_dim * double(dtype_size(c.input)) + 4) +
                      rows * (head_dim * double(dtype_size(c.output)) + 4)});
  return conclude(verdict.ok, verdict.describe(), "partials, merge and check", elapsed);
}

}  // namespace

OpCommands merge_states_commands() {
  auto partials = std::make_shared<int>(4);
  OpCommands commands;
  commands.add_run_options = [partials](CLI::App& run) {
    run.add_option("--partials", *partials,
                   "merge-states: key ranges to split the problem into (1 to 64; default 4)")
        ->check(CLI::Range(1, 64));
  };
  RunOp run;
  run.name = "merge-states";
  run.takes_fp32 = true;
  run.help =
      "the keys split into --partials ranges, their fp32 partial states merged into "
      "--dtype (fp32 too), checked against the unsplit attention";
  run.options = {"--batch",    "--heads",    "--heads-kv", "--seqlen-q",
                 "--seqlen-k", "--head-dim", "--causal",   "--partials", "--counters"};
  run.run = [partials](const RunContext& context) { return run_merge_states(context, *partials); };
  commands.runs = {run};
  return commands;
}

}  // namespace flashjit::tools
