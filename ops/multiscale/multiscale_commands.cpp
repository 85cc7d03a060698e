// multi-scale attention's part of the `flashjit` command: `run --op multiscale` (a forward and
// backward on random inputs, judged against the float64 reference exactly as the tests judge
// it, multiscale_case) and the problems of multiscale-forward and multiscale-backward that
// `autotune` times, with the options each reads.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "flashjit/error.hpp"
#include "format.hpp"
#include "multiscale/multiscale_attention.hpp"
#include "multiscale/multiscale_case.hpp"
#include "multiscale/multiscale_tuning.hpp"
#include "op_commands.hpp"
#include "run_support.hpp"
#include "tune_support.hpp"
#include "work_report.hpp"

namespace flashjit::tools {
namespace {

/// Runs forward and backward of `c` on `runtime` (the mask tensor's gradient too), prints the
/// shape, the kernels, each output's errors and PASS or FAIL; returns the exit code (1 on FAIL).
int run_multiscale_op(const RunContext& context, Runtime& runtime, testing::MultiScaleCase c) {
  c.backward = true;
  c.mask_gradient = c.mask == MultiScaleMask::tensor;
  std::printf("shape:   %s (%s mask, O = S V / max(rowsum|S|, 1))\n", c.name().c_str(),
              c.mask == MultiScaleMask::decay ? "decay" : "tensor");
  const std::string arch = runtime.device().arch();
  const int head_dim = static_cast<int>(c.head_dim);
  std::string kernels =
      kernels::multiscale_forward_spec(
          kernels::default_multiscale_forward_config(c.dtype, head_dim, arch), c.mask, arch)
          .display_name();
  for (const detail::KernelSpec& spec : kernels::multiscale_backward_specs(
           kernels::default_multiscale_backward_config(c.dtype, head_dim, arch), c.mask, arch)) {
    kernels += ", " + spec.display_name();
  }
  std::printf("kernels: %s\n", kernels.c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const testing::MultiScaleVerdict verdict = testing::run_multiscale_case(runtime, c);
  const double elapsed = elapsed_ms(start);
  for (const auto& [name, check] : verdict.checks) {
    std::printf("%-4s max abs error %.3g, relative L2 error %.3g\n", (name + ":").c_str(),
                check.max_abs, check.rel_l2);
  }
  // Q, K, V, dO read and O, dQ, dK, dV written once (a tensor mask and its gradient too); the
  // forward's outputs read again by the backward are not part of the minimum.
  const double element = double(dtype_size(c.dtype));
  const double q = double(c.batch * c.heads_q * c.seqlen_q * c.head_dim) * element;
  const double k = double(c.batch * c.heads_kv * c.seqlen_k * c.head_dim) * element;
  const double mask = c.mask == MultiScaleMask::tensor
                          ? double(c.heads_q * c.seqlen_q * c.seqlen_k) * element * 2
                          : 0.0;
  report_work(context, runtime, "multiscale", {0, 4 * q + 4 * k + mask});
  if (!verdict.ok) {
    std::printf("FAIL: the result does not match the float64 reference\n%s\n",
                verdict.describe().c_str());
    return 1;
  }
  std::printf(
      "PASS: each error within twice that of the plain computation in %s (forward, backward "
      "and check in %s)\n",
      std::string(dtype_name(c.dtype)).c_str(), format_duration_ms(elapsed).c_str());
  return 0;
}

/// The case the run options describe, checked before anything runs.
testing::MultiScaleCase run_case(const RunContext& context, MultiScaleMask mask) {
  const Attention a = attention_of(context.shape);
  testing::MultiScaleCase c;
  c.batch = a.batch;
  c.heads_q = a.heads_q;
  c.heads_kv = a.heads_kv;
  c.seqlen_q = a.seqlen_q;
  c.seqlen_k = a.seqlen_k;
  c.head_dim = a.head_dim;
  c.dtype = parse_dtype(context.basics.dtype, "--dtype");
  c.mask = mask;
  c.seed = context.basics.seed;
  Attention limits = a;  // the sizes' rules are attention's, without its mask
  limits.causal = false;
  check_run_sizes(limits);
  constexpr std::int64_t kMaxPairs = std::int64_t{1} << 24;  // the float64 reference's work
  if (c.batch * c.heads_q * c.seqlen_q * c.seqlen_k > kMaxPairs) {
    throw InvalidArgument("--seqlen-q",
                          "batch x heads x seqlen_q x seqlen_k must be at most 2^24 "
                          "for a run the float64 reference checks");
  }
  return c;
}

MultiScaleMask mask_of(const std::string& flag) {
  return flag == "tensor" ? MultiScaleMask::tensor : MultiScaleMask::decay;
}

const char* const kMaskHelp =
    "decay (γ per head, generated in the kernel; default) or tensor (an fp32 [heads, seqlen_q, "
    "seqlen_k] mask, its gradient checked too)";

/// The problems of one multi-scale op at one dtype: every attention shape of the options,
/// which have no causal flag (the decay mask is causal already).
TuneOp multiscale_tune(bool backward, std::shared_ptr<std::string> mask) {
  TuneOp op;
  op.name = backward ? "multiscale-backward" : "multiscale-forward";
  op.options = {"--head-dim", "--seqlen", "--batch-heads", "--heads", "--heads-kv", "--mask"};
  op.add_problems = [backward, mask](const TuneShape& shape, DType dtype, ProblemList& list) {
    if (shape.causal != std::vector<bool>{false}) {
      throw InvalidArgument("--causal",
                            "applies to the attention ops; the multi-scale ops' decay mask is "
                            "causal already (--mask)");
    }
    for (const Attention& a : tune_attentions(shape)) {
      const MultiScaleAttention m{a.batch,    a.heads_q,  a.heads_kv, a.seqlen_q,
                                  a.seqlen_k, a.head_dim, 0.0f,       mask_of(*mask)};
      list.push_back(std::make_shared<kernels::MultiScaleProblem>(backward, dtype, m));
    }
  };
  return op;
}

}  // namespace

OpCommands multiscale_commands() {
  auto run_mask = std::make_shared<std::string>("decay");
  auto tune_mask = std::make_shared<std::string>("decay");
  OpCommands commands;
  commands.add_run_options = [run_mask](CLI::App& run) {
    run.add_option("--mask", *run_mask, std::string("multiscale: ") + kMaskHelp)
        ->check(CLI::IsMember({"decay", "tensor"}));
  };
  RunOp run;
  run.name = "multiscale";
  run.help = "multi-scale attention forward and backward (--mask decay or tensor)";
  run.options = {"--batch",    "--heads",    "--heads-kv", "--seqlen-q",
                 "--seqlen-k", "--head-dim", "--mask",     "--counters"};
  run.run = [run_mask](const RunContext& context) {
    const testing::MultiScaleCase c = run_case(context, mask_of(*run_mask));
    Runtime runtime = context.open_runtime();
    return run_multiscale_op(context, runtime, c);
  };
  commands.runs = {run};
  commands.add_autotune_options = [tune_mask](CLI::App& cmd) {
    cmd.add_option("--mask", *tune_mask,
                   std::string("multiscale-forward, multiscale-backward: ") + kMaskHelp)
        ->check(CLI::IsMember({"decay", "tensor"}))
        ->capture_default_str();
  };
  commands.tunes = {multiscale_tune(false, tune_mask), multiscale_tune(true, tune_mask)};
  return commands;
}

}  // namespace flashjit::tools
