// `flashjit run`: one attention forward (or backward) on random inputs, on the GPU, or on the
// CPU emulator when there is none (or with --emulate), judged against the float64 reference
// exactly as the tests judge it (attention/attention_case, backward_case): the relative L2
// error of O (of dQ, dK, dV) must be at most twice that of a plain attention (backward)
// computed in the input dtype. --counters adds the emulator's work counters; --config runs a
// config of the op's space instead of the runtime's choice. The options, and which runs use
// each (an option a run does not use is refused), are in run_options.cpp.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention/attention_case.hpp"
#include "attention/attention_forward.hpp"
#include "attention/attention_tuning.hpp"
#include "attention/backward_case.hpp"
#include "attention/inference_case.hpp"
#include "chosen_kernels.hpp"
#include "commands.hpp"
#include "flashjit/device.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"
#include "format.hpp"
#include "merge_states/merge_states.hpp"
#include "merge_states/merge_states_case.hpp"
#include "merge_states/merge_states_space.cuh"
#include "run_layer_norm.hpp"
#include "run_multiscale.hpp"
#include "run_options.hpp"
#include "work_report.hpp"

namespace flashjit::tools {
namespace {

/// The library's own limits on the descriptor, reported against the flag that set the field.
void check_library_limits(const Attention& attention) {
  validate_attention_flags(attention, {{"attention.batch", "--batch"},
                                       {"attention.heads_q", "--heads"},
                                       {"attention.heads_kv", "--heads-kv"},
                                       {"attention.seqlen_q", "--seqlen-q"},
                                       {"attention.seqlen_k", "--seqlen-k"},
                                       {"attention.head_dim", "--head-dim"}});
}

/// The run holds every tensor in the kernel's dtype, in float64 and on the device (host memory
/// on the emulator), and the reference's output: about 32 bytes per element of Q, K, V and O.
/// A shape that cannot fit in half of this machine's memory is refused before anything is
/// allocated (it would end in std::bad_alloc, or in swapping), naming the longer sequence.
void check_host_memory(const reference::Problem& p) {
  constexpr double kBytesPerElement = 32;
  const double elements =
      2.0 * double(p.batch) * double(p.head_dim) *
      (double(p.seqlen_q) * double(p.heads_q) + double(p.seqlen_k) * double(p.heads_kv));
  const double needed = elements * kBytesPerElement;
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (needed <= memory / 2) return;
  const bool keys = p.seqlen_k > p.seqlen_q;
  throw InvalidArgument(keys ? "--seqlen-k" : "--seqlen-q",
                        "is " + std::to_string(keys ? p.seqlen_k : p.seqlen_q) +
                            ": the run would need about " + format_bytes(std::uintmax_t(needed)) +
                            " of host memory for its tensors and the float64 reference; this "
                            "machine has " +
                            format_bytes(std::uintmax_t(memory)) +
                            " (a run may use half). Use a smaller shape");
}

testing::ForwardCase forward_case(const RunOptions& options) {
  testing::ForwardCase c;
  c.problem.batch = options.batch;
  c.problem.heads_q = options.heads;
  c.problem.heads_kv = options.heads_kv > 0 ? options.heads_kv : options.heads;
  c.problem.seqlen_q = options.seqlen_q;
  c.problem.seqlen_k = options.seqlen_k > 0 ? options.seqlen_k : options.seqlen_q;
  c.problem.head_dim = options.head_dim;
  c.problem.causal = options.causal;
  c.dtype = parse_dtype(options.dtype, "--dtype");
  if (c.dtype == DType::f32) throw InvalidArgument("--dtype", "attention runs in fp16 or bf16");
  if (!attention_forward_space::head_dim_supported(static_cast<int>(options.head_dim))) {
    throw InvalidArgument("--head-dim", "must be a multiple of 8 from 8 to 256");
  }
  c.layout = options.layout == "bhsd" ? reference::Layout::bhsd : reference::Layout::bshd;
  c.seed = options.seed;
  if (c.problem.heads_q % c.problem.heads_kv != 0) {
    throw InvalidArgument("--heads-kv",
                          "must divide --heads (" + std::to_string(c.problem.heads_q) + ")");
  }
  check_library_limits(c.attention());
  check_host_memory(c.problem);
  return c;
}

/// The runtime to run on, after saying which on the first line of output.
Runtime open_runtime(const RunOptions& options) {
  std::string why = "--emulate";
  if (!options.emulate) {
    const SystemInfo system = query_system();
    if (!system.devices.empty()) {
      if (!options.arch.empty()) {
        throw InvalidArgument("--arch", "names the GPU the emulator models: add --emulate");
      }
      const DeviceInfo& gpu = system.devices.front();
      std::printf("backend: GPU 0, %s (%s)\n", gpu.name.c_str(), gpu.arch().c_str());
      return Runtime();
    }
    why = system.unavailable_reason;
  }
  RuntimeOptions emulated{.backend = Backend::emulator};
  if (!options.arch.empty()) emulated.emulated_arch = options.arch;
  Runtime runtime(emulated);
  std::printf("backend: CPU emulator, not a GPU (%s), modelling %s\n", why.c_str(),
              runtime.device().arch().c_str());
  std::printf(
      "         the same kernel templates compiled for the host, with memory and race "
      "checks; slow, so keep shapes small\n");
  return runtime;
}

/// The tuning problem of the run: the case's attention, deterministic as the flag says.
kernels::AttentionProblem run_problem(const RunOptions& options, const testing::ForwardCase& c,
                                      bool backward) {
  kernels::AttentionProblem problem(backward, c.dtype, c.attention());
  problem.attention.deterministic = backward && options.deterministic;
  return problem;
}

/// The op's config `options.config` names (exit 2 when it names none), or nullopt without one.
std::optional<autotune::TunedConfig> config_from_flag(const RunOptions& options,
                                                      const testing::ForwardCase& c,
                                                      bool backward) {
  if (options.config.empty()) return std::nullopt;
  return named_config(run_problem(options, c, backward), options.config, "--config");
}

/// The config's alternative, as the case runners take it.
template <class Config>
std::optional<Config> config_of(const std::optional<autotune::TunedConfig>& config) {
  if (!config) return std::nullopt;
  return config->get<Config>();
}

/// The shape line of every attention run, dense or inference: "shape:   batch 2, heads 8 (kv 1),
/// seqlen_q 1, seqlen_k 300, head_dim 64, bf16, bshd, causal", then what the inference forms
/// add (", paged, 16 keys a page", ", splits 3"). A length is a list where sequences differ.
struct ShapeLine {
  std::int64_t batch = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  std::string seqlen_q, seqlen_k;
  DType dtype = DType::bf16;
  const char* layout = "bshd";
  bool causal = false;
  std::string extra;
};

void print_shape(const ShapeLine& s) {
  std::printf(
      "shape:   batch %lld, heads %lld (kv %lld), seqlen_q %s, seqlen_k %s, head_dim %lld, "
      "%s, %s%s%s\n",
      static_cast<long long>(s.batch), static_cast<long long>(s.heads_q),
      static_cast<long long>(s.heads_kv), s.seqlen_q.c_str(), s.seqlen_k.c_str(),
      static_cast<long long>(s.head_dim), std::string(dtype_name(s.dtype)).c_str(), s.layout,
      s.causal ? ", causal" : "", s.extra.c_str());
}

void print_problem(const RunOptions& options, const testing::ForwardCase& c, Runtime& runtime,
                   bool backward, const std::optional<autotune::TunedConfig>& config) {
  const reference::Problem& p = c.problem;
  print_shape({.batch = p.batch,
               .heads_q = p.heads_q,
               .heads_kv = p.heads_kv,
               .head_dim = p.head_dim,
               .seqlen_q = std::to_string(p.seqlen_q),
               .seqlen_k = std::to_string(p.seqlen_k),
               .dtype = c.dtype,
               .layout = c.layout == reference::Layout::bshd ? "bshd" : "bhsd",
               .causal = p.causal,
               .extra = ""});
  const kernels::AttentionProblem problem = run_problem(options, c, backward);
  std::printf("kernel:  %s\n",
              chosen_kernels(runtime, problem.attention, c.dtype, backward, config).c_str());
  std::fflush(stdout);
}

/// With --counters: the emulator's counters of the op's kernels (the backward's run has a
/// forward before it, for O and LSE; it is not counted).
void print_counters(const RunOptions& options, Runtime& runtime, const testing::ForwardCase& c,
                    bool backward) {
  if (!options.counters) return;
  const kernels::AttentionProblem problem = run_problem(options, c, backward);
  print_work(runtime.emulated_work(), backward ? "attention_backward" : "attention_forward",
             problem.flops(), minimum_global_bytes(c.attention(), c.dtype, backward));
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// The last line, PASS or FAIL with the verdict, and the exit code (1 on FAIL).
int conclude(bool ok, const std::string& verdict, const char* timed, double elapsed_ms) {
  if (!ok) {
    std::printf("FAIL: the result does not match the float64 reference\n%s\n", verdict.c_str());
    return 1;
  }
  std::printf("PASS: matches the float64 reference (%s in %s)\n", timed,
              format_duration_ms(elapsed_ms).c_str());
  return 0;
}

/// One gradient's line: "dQ:      max abs error ..., relative L2 error ... (bound ...)".
void print_gradient(const char* name, const testing::GradientVerdict& g) {
  std::printf(
      "%-8s max abs error %.3g, relative L2 error %.3g (bound %.3g: twice a plain "
      "backward's %.3g)\n",
      name, g.check.max_abs, g.error, g.bound, g.plain_error);
}

int run_backward(const RunOptions& options) {
  const testing::ForwardCase forward = forward_case(options);
  testing::BackwardCase c;
  c.problem = forward.problem;
  c.dtype = forward.dtype;
  c.layout = forward.layout;
  c.seed = forward.seed;
  c.deterministic = options.deterministic;
  const std::optional<autotune::TunedConfig> config = config_from_flag(options, forward, true);
  Runtime runtime = open_runtime(options);
  print_problem(options, forward, runtime, true, config);
  const auto start = std::chrono::steady_clock::now();
  const testing::BackwardVerdict verdict =
      testing::run_backward_case(runtime, c, config_of<kernels::BackwardConfig>(config));
  const double elapsed = elapsed_ms(start);
  print_gradient("dQ:", verdict.dq);
  print_gradient("dK:", verdict.dk);
  print_gradient("dV:", verdict.dv);
  print_counters(options, runtime, forward, true);
  return conclude(verdict.ok, verdict.describe(), "forward, backward and check", elapsed);
}

int run_forward(const RunOptions& options) {
  const testing::ForwardCase c = forward_case(options);
  const std::optional<autotune::TunedConfig> config = config_from_flag(options, c, false);
  Runtime runtime = open_runtime(options);
  print_problem(options, c, runtime, false, config);
  const auto start = std::chrono::steady_clock::now();
  const testing::ForwardVerdict verdict =
      testing::run_forward_case(runtime, c, config_of<kernels::ForwardConfig>(config));
  const double elapsed = elapsed_ms(start);
  std::printf(
      "O:       max abs error %.3g, relative L2 error %.3g (bound %.3g: twice a plain "
      "%s attention's %.3g)\n",
      verdict.out.max_abs, verdict.error, 2 * verdict.plain_error,
      std::string(dtype_name(c.dtype)).c_str(), verdict.plain_error);
  std::printf("LSE:     max abs error %.3g, relative L2 error %.3g\n", verdict.lse.max_abs,
              verdict.lse.rel_l2);
  print_counters(options, runtime, c, false);
  return conclude(verdict.ok, verdict.describe(), "kernel and check", elapsed);
}

/// The inference case of the options: --varlen N sequences of random lengths up to --seqlen-q
/// and --seqlen-k (0 and 1 among them), packed; or --batch sequences of exactly those lengths;
/// their keys packed, or with --paged in a cache of --page-size pages in a shuffled order.
testing::InferenceCase inference_case(const RunOptions& options) {
  if (options.paged && options.page_size % 16 != 0) {
    throw InvalidArgument("--page-size",
                          "is " + std::to_string(options.page_size) + "; must be a multiple of 16");
  }
  const testing::ForwardCase shape = forward_case(options);  // checks the sizes and dtype
  const reference::Problem& p = shape.problem;
  testing::InferenceCase c;
  if (options.varlen > 0) {
    c = testing::random_lengths_case(options.varlen, p.seqlen_q, p.seqlen_k, options.seed);
    c.keys = testing::KeyStorage::packed;
  } else {
    c.seqlens_q.assign(static_cast<std::size_t>(p.batch), p.seqlen_q);
    c.seqlens_k.assign(static_cast<std::size_t>(p.batch), p.seqlen_k);
    c.seed = options.seed;
  }
  if (options.paged) c.keys = testing::KeyStorage::paged;
  c.page_size = options.page_size;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.head_dim = p.head_dim;
  c.causal = p.causal;
  c.dtype = shape.dtype;
  c.splits = options.splits;
  c.deterministic = options.deterministic;
  return c;
}

/// The useful work of an inference case, sequence by sequence: 4 · visible pairs · head_dim
/// FLOPs per query head, and each input and output moved once.
struct InferenceMinimum {
  double flops = 0;
  double bytes = 0;
};
InferenceMinimum inference_minimum(const testing::InferenceCase& c) {
  InferenceMinimum m;
  for (std::size_t b = 0; b < c.seqlens_q.size(); ++b) {
    Attention a = c.attention();
    a.batch = 1;
    a.seqlen_q = c.seqlens_q[b];
    a.seqlen_k = c.seqlens_k[b];
    m.flops += 4.0 * kernels::visible_pairs(a) * double(c.head_dim) * double(c.heads_q);
    m.bytes += minimum_global_bytes(a, c.dtype, false);
  }
  return m;
}

/// "300" when every sequence has that length, else "[1,0,17]".
std::string lengths_text(const std::vector<std::int64_t>& lengths) {
  if (std::adjacent_find(lengths.begin(), lengths.end(), std::not_equal_to<>()) == lengths.end()) {
    return lengths.empty() ? "0" : std::to_string(lengths.front());
  }
  std::string text = "[";
  for (std::int64_t length : lengths) {
    if (text.size() > 1) text += ',';
    text += std::to_string(length);
  }
  return text + "]";
}

/// The inference case's shape line, as the dense runs print theirs.
void print_inference_shape(const testing::InferenceCase& c) {
  std::string extra = c.packed_q ? ", packed (varlen)" : "";
  if (c.keys == testing::KeyStorage::paged) {
    extra += ", paged (pages of " + std::to_string(c.page_size);
    extra += " keys)";
  }
  if (c.splits > 0) extra += ", splits " + std::to_string(c.splits);
  print_shape({.batch = static_cast<std::int64_t>(c.seqlens_q.size()),
               .heads_q = c.heads_q,
               .heads_kv = c.heads_kv,
               .head_dim = c.head_dim,
               .seqlen_q = lengths_text(c.seqlens_q),
               .seqlen_k = lengths_text(c.seqlens_k),
               .dtype = c.dtype,
               .layout = "bshd",
               .causal = c.causal,
               .extra = extra});
}

int run_inference(const RunOptions& options) {
  const testing::InferenceCase c = inference_case(options);
  Runtime runtime = open_runtime(options);
  print_inference_shape(c);
  std::fflush(stdout);
  const bool backward = options.op == "attention-backward";
  const auto start = std::chrono::steady_clock::now();
  const testing::InferenceVerdict verdict = backward
                                                ? testing::run_inference_backward_case(runtime, c)
                                                : testing::run_inference_case(runtime, c);
  const double elapsed = elapsed_ms(start);
  if (runtime.backend() == Backend::emulator) {
    for (const KernelWork& kernel : runtime.emulated_work()) {
      std::printf("kernel:  %s\n", kernel.kernel.c_str());
    }
  }
  std::printf(
      "%s worst relative L2 error / bound over the sequences %.3g (each bound twice "
      "a plain %s %s's error on that sequence)\n",
      backward ? "dQ dK dV:" : "O:      ", verdict.worst_ratio,
      std::string(dtype_name(c.dtype)).c_str(), backward ? "backward" : "attention");
  if (options.counters && !backward) {
    const InferenceMinimum minimum = inference_minimum(c);
    print_work(runtime.emulated_work(), "", minimum.flops, minimum.bytes);
  }
  return conclude(verdict.ok, verdict.describe(), "kernels and check", elapsed);
}

/// The merge-states case of the options: the attention problem's keys split into --partials
/// random ranges, partials in fp32 (what split-KV writes), merged into --dtype.
testing::MergeStatesCase merge_states_case(const RunOptions& options) {
  if (options.head_dim > merge_states_space::kMaxHeadDim) {
    throw InvalidArgument("--head-dim",
                          "must be from 1 to " + std::to_string(merge_states_space::kMaxHeadDim));
  }
  testing::MergeStatesCase c;
  // The sizes are checked as the forward's; dtype and head dim are the merge's own (any dtype,
  // head dims to kMaxHeadDim), so the forward sees ones it accepts.
  RunOptions sizes = options;
  sizes.dtype = "bf16";
  sizes.head_dim = 64;
  c.problem = forward_case(sizes).problem;
  c.problem.head_dim = options.head_dim;
  c.partials = options.partials;
  c.output = parse_dtype(options.dtype, "--dtype");
  c.seed = options.seed;
  return c;
}

int run_merge_states(const RunOptions& options) {
  const testing::MergeStatesCase c = merge_states_case(options);
  Runtime runtime = open_runtime(options);
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
  return conclude(verdict.ok, verdict.describe(), "partials, merge and check", elapsed);
}

int run_layer_norm(const RunOptions& options) {
  LayerNormRun run = options.layer_norm;
  run.dtype = options.dtype;
  run.seed = options.seed;
  check_layer_norm_run(run);
  Runtime runtime = open_runtime(options);
  return run_layer_norm_op(runtime, run);
}

int run_multiscale(const RunOptions& options) {
  testing::MultiScaleCase c;
  c.batch = options.batch;
  c.heads_q = options.heads;
  c.heads_kv = options.heads_kv > 0 ? options.heads_kv : options.heads;
  c.seqlen_q = options.seqlen_q;
  c.seqlen_k = options.seqlen_k > 0 ? options.seqlen_k : options.seqlen_q;
  c.head_dim = options.head_dim;
  c.dtype = parse_dtype(options.dtype, "--dtype");
  c.mask = options.mask == "tensor" ? MultiScaleMask::tensor : MultiScaleMask::decay;
  c.seed = options.seed;
  Attention limits;  // the sizes' rules are attention's
  limits.batch = c.batch;
  limits.heads_q = c.heads_q;
  limits.heads_kv = c.heads_kv;
  limits.seqlen_q = c.seqlen_q;
  limits.seqlen_k = c.seqlen_k;
  limits.head_dim = c.head_dim;
  check_library_limits(limits);
  constexpr std::int64_t kMaxPairs = std::int64_t{1} << 24;  // the float64 reference's work
  if (c.batch * c.heads_q * c.seqlen_q * c.seqlen_k > kMaxPairs) {
    throw InvalidArgument("--seqlen-q",
                          "batch x heads x seqlen_q x seqlen_k must be at most 2^24 "
                          "for a run the float64 reference checks");
  }
  Runtime runtime = open_runtime(options);
  return run_multiscale_op(runtime, c);
}

/// The run the parsed options chose, after refusing the options it does not use.
int run_parsed(const CLI::App& run, const RunOptions& options) {
  refuse_unused_options(run, options);
  if (options.counters && !options.emulate && !query_system().devices.empty()) {
    throw InvalidArgument("--counters", "counts the emulator's work: add --emulate");
  }
  if (options.op == "merge-states") return run_merge_states(options);
  if (options.op == "layer-norm") return run_layer_norm(options);
  if (options.op == "multiscale") return run_multiscale(options);
  if (inference_run(options)) return run_inference(options);
  return options.op == "attention-backward" ? run_backward(options) : run_forward(options);
}

}  // namespace

Subcommand add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand(
      "run",
      "Run one attention forward (or backward) on random inputs (on the GPU, else on the CPU "
      "emulator) and check it against a float64 reference");
  add_run_options(*run, *options);
  return {run, [options, run] { return run_parsed(*run, *options); }};
}

}  // namespace flashjit::tools
