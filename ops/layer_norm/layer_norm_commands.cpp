// layer norm's part of the `flashjit` command: `run --op layer-norm` (a layer norm or RMS norm
// forward and backward on random inputs, judged against the float64 reference exactly as the
// tests judge it, layer_norm_case) and the problems of layer-norm and layer-norm-backward that
// `autotune` times, with the options each reads.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chosen_kernels.hpp"
#include "flashjit/error.hpp"
#include "format.hpp"
#include "layer_norm/layer_norm_case.hpp"
#include "layer_norm/layer_norm_space.cuh"
#include "layer_norm/layer_norm_tuning.hpp"
#include "op_commands.hpp"
#include "run_support.hpp"
#include "work_report.hpp"

namespace flashjit::tools {
namespace {

/// A layer norm run: the shared --rows and --cols, its own options, --dtype and --seed.
struct LayerNormRun {
  std::int64_t rows = 64;
  std::int64_t cols = 1024;
  std::string dtype = "bf16";
  bool rms = false;
  bool bias = false;
  bool residual = false;
  std::uint64_t seed = 1;
};

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

/// Throws InvalidArgument naming the option for a run the op refuses, before anything runs.
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

/// Global bytes a direction's kernels moved and the least they must move.
struct DirectionBytes {
  double moved = 0;
  double minimum = 0;
  std::uint64_t launches = 0;  // of the row kernel
  std::uint64_t blocks = 0;    // of the row kernel, over its launches
};

/// The cluster size of a row kernel by its name's ".x<N>." trait (1 when it has none).
int cluster_of(const std::string& kernel) {
  const std::size_t at = kernel.find(".x");
  if (at == std::string::npos) return 1;
  const std::size_t digits = kernel.find_first_not_of("0123456789", at + 2);
  if (digits == at + 2 || digits == std::string::npos || kernel[digits] != '.') return 1;
  return std::stoi(kernel.substr(at + 2, digits - at - 2));
}

/// The forward's and the backward's bytes over the kernels `work` ran for `c`. The least is
/// each launch's [rows, cols] tensors once (forward: x and y, with a fused add the residual
/// read and the sum written; backward: x, dy and dx), the statistics once, dγ, dβ, dbias written
/// once, and per block of the row kernel the [cols] vectors it reads (γ, β, the bias) and for
/// the backward its partial dγ, dβ, dbias written and read back by the second kernel: the
/// persistent kernels' own per-block cost, so the ratio shows any byte past it. The blocks of a
/// cluster that share each row count as one (each reads and writes its chunk of the columns).
std::pair<DirectionBytes, DirectionBytes> layer_norm_bytes(const std::vector<KernelWork>& work,
                                                           const testing::LayerNormCase& c) {
  const double element = double(dtype_size(c.dtype));
  const double matrix = double(c.rows) * double(c.cols) * element;
  const double column = double(c.cols) * element;
  const double statistics = double(c.rows) * 4.0 * (c.rms ? 1 : 2);
  const int sums = 1 + (c.rms ? 0 : 1) + (c.bias ? 1 : 0);  // γ, β, bias; dγ, dβ, dbias
  DirectionBytes forward, backward;
  for (const KernelWork& kernel : work) {
    const double moved =
        double(kernel.work.global_bytes_read) + double(kernel.work.global_bytes_written);
    const auto launches = double(kernel.launches);
    const auto blocks = double(kernel.work.ctas) / cluster_of(kernel.kernel);
    if (kernel.kernel.rfind("layer_norm.", 0) == 0) {
      forward.moved += moved;
      forward.launches += kernel.launches;
      forward.blocks += kernel.work.ctas;
      const int matrices = 2 + (c.residual ? 1 : 0) + (c.fused() ? 1 : 0);
      forward.minimum += launches * (matrices * matrix + statistics) + blocks * sums * column;
    } else if (kernel.kernel.rfind("layer_norm_backward.", 0) == 0) {
      backward.moved += moved;
      backward.launches += kernel.launches;
      backward.blocks += kernel.work.ctas;
      backward.minimum += launches * (3 * matrix + statistics + sums * column) +
                          blocks * (column + 2.0 * sums * double(c.cols) * 4.0);
    } else if (kernel.kernel.rfind("layer_norm_param_grad.", 0) == 0) {
      backward.moved += moved;
    }
  }
  return {forward, backward};
}

void print_direction(const char* name, const DirectionBytes& bytes) {
  std::printf("%-29s %.4f (%llu launches, %llu blocks)\n", name, bytes.moved / bytes.minimum,
              static_cast<unsigned long long>(bytes.launches),
              static_cast<unsigned long long>(bytes.blocks));
}

/// The kernels the emulator ran, and with --counters their work and global bytes against the
/// least the shape must move.
void report_layer_norm_work(const RunContext& context, const Runtime& runtime,
                            const testing::LayerNormCase& c) {
  std::string ran;
  for (const KernelWork& kernel : runtime.emulated_work()) {
    ran += (ran.empty() ? "" : ", ") + kernel.kernel;
  }
  if (!ran.empty()) std::printf("ran:     %s\n", ran.c_str());
  const auto [forward_bytes, backward_bytes] = layer_norm_bytes(runtime.emulated_work(), c);
  report_work(context, runtime, "layer_norm", {0, forward_bytes.minimum + backward_bytes.minimum});
  if (context.basics.counters) {
    print_direction("forward_global_bytes_ratio", forward_bytes);
    print_direction("backward_global_bytes_ratio", backward_bytes);
  }
}

/// Runs forward and backward of `run`, prints the shape, the kernels, each output's errors and
/// PASS or FAIL (and the counters, when asked); returns the exit code (1 on FAIL).
int run_layer_norm_op(const RunContext& context, Runtime& runtime, const LayerNormRun& run) {
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
  const double elapsed = elapsed_ms(start);
  std::printf("forward (relative L2 bound %.3g for y):\n", forward.bound);
  print_checks(forward);
  std::printf("backward (relative L2 bound %.3g):\n", backward.bound);
  print_checks(backward);
  // The emulator says which kernels ran (the launch may split long rows over a cluster, which
  // the chosen config's names above do not say) and counts their bytes; a GPU run has neither.
  if (runtime.backend() == Backend::emulator) report_layer_norm_work(context, runtime, c);
  return conclude(forward.ok && backward.ok, forward.describe() + "\n" + backward.describe(),
                  "forward, backward and check", elapsed);
}

void add_run_options(CLI::App& run, LayerNormRun& flags) {
  run.add_flag("--rms", flags.rms, "layer-norm: RMS norm (no mean, no beta)");
  run.add_flag("--bias", flags.bias, "layer-norm: fuse a [cols] bias add before the norm");
  run.add_flag("--residual", flags.residual,
               "layer-norm: fuse a [rows, cols] residual add before the norm (the sum is written "
               "and checked)");
}

/// layer norm's own options of `flashjit autotune`: the shapes and the fused adds.
struct LayerNormTune {
  std::vector<std::int64_t> rows = {8192};
  std::vector<int> cols = {1024};
  bool rms = false;
  bool bias = false;
  bool residual = false;
};

void add_tune_options(CLI::App& cmd, LayerNormTune& flags) {
  cmd.add_option("--rows", flags.rows, "layer-norm, layer-norm-backward: rows of x")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--cols", flags.cols, "layer-norm, layer-norm-backward: columns of x (1-65536)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_flag("--rms", flags.rms, "layer-norm, layer-norm-backward: RMS norm");
  cmd.add_flag("--bias", flags.bias,
               "layer-norm, layer-norm-backward: a fused bias add (the backward: writes dbias)");
  cmd.add_flag("--residual", flags.residual, "layer-norm: a fused residual add");
}

/// The problems of one layer norm op at one dtype: every rows x cols.
TuneOp layer_norm_tune(bool backward, std::shared_ptr<LayerNormTune> flags) {
  TuneOp op;
  op.name = backward ? "layer-norm-backward" : "layer-norm";
  op.takes_fp32 = true;
  op.options = {"--rows", "--cols", "--rms", "--bias"};
  if (!backward) op.options.push_back("--residual");
  op.add_problems = [backward, flags](const TuneShape&, DType dtype, ProblemList& list) {
    for (int cols : flags->cols) {
      if (cols < 1 || cols > layer_norm_space::kMaxCols) {
        throw InvalidArgument("--cols", "is " + std::to_string(cols) + "; must be from 1 to " +
                                            std::to_string(layer_norm_space::kMaxCols));
      }
      for (std::int64_t rows : flags->rows) {
        if (rows < 1) throw InvalidArgument("--rows", "must be at least 1 to be timed");
        list.push_back(std::make_shared<kernels::LayerNormProblem>(
            backward, dtype,
            kernels::LayerNormShape{rows, cols, flags->rms, flags->bias,
                                    flags->residual && !backward}));
      }
    }
  };
  return op;
}

}  // namespace

OpCommands layer_norm_commands() {
  auto run_flags = std::make_shared<LayerNormRun>();
  auto tune_flags = std::make_shared<LayerNormTune>();
  OpCommands commands;
  commands.add_run_options = [run_flags](CLI::App& run) { add_run_options(run, *run_flags); };
  RunOp run;
  run.name = "layer-norm";
  run.takes_fp32 = true;
  run.help =
      "forward and backward of --rows x --cols (--dtype fp32 too), with --rms, --bias, "
      "--residual";
  run.options = {"--rows", "--cols", "--rms", "--bias", "--residual", "--counters"};
  run.run = [run_flags](const RunContext& context) {
    LayerNormRun flags = *run_flags;
    flags.rows = context.shape.rows;
    flags.cols = context.shape.cols;
    flags.dtype = context.basics.dtype;
    flags.seed = context.basics.seed;
    check_layer_norm_run(flags);
    Runtime runtime = context.open_runtime();
    return run_layer_norm_op(context, runtime, flags);
  };
  commands.runs = {run};
  commands.add_autotune_options = [tune_flags](CLI::App& cmd) {
    add_tune_options(cmd, *tune_flags);
  };
  commands.tunes = {layer_norm_tune(false, tune_flags), layer_norm_tune(true, tune_flags)};
  return commands;
}

}  // namespace flashjit::tools
