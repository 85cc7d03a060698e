#include "attention/check/attention_run.hpp"

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "attention/attention_forward.hpp"
#include "attention/attention_tuning.hpp"
#include "attention/check/backward_case.hpp"
#include "attention/check/dropout_mask.hpp"
#include "attention/check/host_modifiers.hpp"
#include "attention/wide/wide_forward_space.cuh"
#include "chosen_kernels.hpp"
#include "flashjit/error.hpp"
#include "run_support.hpp"
#include "work_report.hpp"

namespace flashjit::tools {
namespace {

/// ", dropout 0.15" for a problem with dropout, else "".
std::string dropout_text(const reference::Problem& p) {
  if (!p.dropout) return "";
  char text[48];
  std::snprintf(text, sizeof text, ", dropout %g", p.dropout_p);
  return text;
}

/// The tuning problem of the run: the case's attention, deterministic as the flag says.
kernels::AttentionProblem run_problem(const AttentionRunFlags& flags, const testing::ForwardCase& c,
                                      bool backward) {
  kernels::AttentionProblem problem(backward, c.dtype, c.attention());
  problem.attention.deterministic = backward && flags.deterministic;
  return problem;
}

/// The op's config `--config` names (exit 2 when it names none), or nullopt without one.
std::optional<autotune::TunedConfig> config_from_flag(const AttentionRunFlags& flags,
                                                      const testing::ForwardCase& c,
                                                      bool backward) {
  if (flags.config.empty()) return std::nullopt;
  return named_config(run_problem(flags, c, backward), flags.config, "--config");
}

/// The config's alternative, as the case runners take it.
template <class Config>
std::optional<Config> config_of(const std::optional<autotune::TunedConfig>& config) {
  if (!config) return std::nullopt;
  return config->get<Config>();
}

void print_problem(const AttentionRunFlags& flags, const testing::ForwardCase& c, Runtime& runtime,
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
               .extra = (p.head_dim_v != 0 ? ", head_dim_v " + std::to_string(p.head_dim_v) : "") +
                        dropout_text(p)});
  const kernels::AttentionProblem problem = run_problem(flags, c, backward);
  // Rebuilt from its attention, which run_problem changed after building it.
  const kernels::AttentionProblem chosen(backward, c.dtype, problem.attention);
  std::printf("kernel:  %s\n", chosen_kernels(runtime, chosen, config).c_str());
  std::fflush(stdout);
}

/// With --counters: the emulator's counters of the op's kernels (the backward's run has a
/// forward before it, for O and LSE; it is not counted).
void print_counters(const RunContext& context, const AttentionRunFlags& flags, Runtime& runtime,
                    const testing::ForwardCase& c, bool backward) {
  if (!context.basics.counting()) return;
  const kernels::AttentionProblem problem = run_problem(flags, c, backward);
  report_work(context, runtime, backward ? "attention_backward" : "attention_forward",
              {problem.flops(), minimum_global_bytes(c.attention(), c.dtype, backward)});
}

/// One gradient's line: "dQ:      max abs error ..., relative L2 error ... (bound ...)".
void print_gradient(const char* name, const testing::GradientVerdict& g) {
  std::printf(
      "%-8s max abs error %.3g, relative L2 error %.3g (bound %.3g: twice a plain "
      "backward's %.3g)\n",
      name, g.check.max_abs, g.error, g.bound, g.plain_error);
}

}  // namespace

testing::ForwardCase forward_case(const RunContext& context, const AttentionRunFlags& flags) {
  testing::ForwardCase c;
  c.dtype = parse_dtype(context.basics.dtype, "--dtype");
  if (c.dtype == DType::f32) {
    throw InvalidArgument("--dtype", "attention runs in fp16 or bf16 (e4m3: the fp8 forward)");
  }
  // Past 256 the inference forward's wide path (the library names what else stops at 256).
  const std::int64_t head_dim = context.shape.head_dim;
  const std::int64_t most =
      flags.inference() ? wide_forward_space::kMaxHeadDim : attention_forward_space::kMaxHeadDim;
  if (head_dim < 8 || head_dim > most || head_dim % 8 != 0) {
    throw InvalidArgument("--head-dim",
                          "must be a multiple of 8 from 8 to 256 (to 576 with "
                          "--paged or --varlen: the inference forward)");
  }
  c.layout = flags.layout == "bhsd" ? reference::Layout::bhsd : reference::Layout::bshd;
  c.seed = context.basics.seed;
  c.problem = checked_problem(context.shape, flags.inference());
  if (!flags.score_mod.empty() || !flags.mask_mod.empty()) {
    std::printf("flashjit: compiling --score-mod/--mask-mod for the float64 reference\n");
    HostModifiers modifiers = compile_host_modifiers(flags.score_mod, flags.mask_mod);
    c.problem.score_mod_text = flags.score_mod;
    c.problem.score_mod = std::move(modifiers.score);
    c.problem.score_mod_slope = std::move(modifiers.score_slope);
    c.problem.mask_mod_text = flags.mask_mod;
    c.problem.mask_mod = std::move(modifiers.mask);
  }
  if (flags.dropout != 0.0f) {
    if (!(flags.dropout > 0.0f && flags.dropout < 1.0f)) {
      throw InvalidArgument("--dropout", "must be in [0, 1) (0: none)");
    }
    testing::set_dropout(c.problem, flags.dropout, context.basics.seed, 0);
  }
  return c;
}

void print_shape(const ShapeLine& s) {
  std::printf(
      "shape:   batch %lld, heads %lld (kv %lld), seqlen_q %s, seqlen_k %s, head_dim %lld, "
      "%s, %s%s%s\n",
      static_cast<long long>(s.batch), static_cast<long long>(s.heads_q),
      static_cast<long long>(s.heads_kv), s.seqlen_q.c_str(), s.seqlen_k.c_str(),
      static_cast<long long>(s.head_dim), std::string(dtype_name(s.dtype)).c_str(), s.layout,
      s.causal ? ", causal" : "", s.extra.c_str());
}

int run_dense_attention(const RunContext& context, const AttentionRunFlags& flags, bool backward) {
  const testing::ForwardCase c = forward_case(context, flags);
  const std::optional<autotune::TunedConfig> config = config_from_flag(flags, c, backward);
  Runtime runtime = context.open_runtime();
  print_problem(flags, c, runtime, backward, config);
  const auto start = std::chrono::steady_clock::now();
  if (backward) {
    testing::BackwardCase b;
    b.problem = c.problem;
    b.dtype = c.dtype;
    b.layout = c.layout;
    b.seed = c.seed;
    b.deterministic = flags.deterministic;
    const testing::BackwardVerdict verdict =
        testing::run_backward_case(runtime, b, config_of<kernels::BackwardConfig>(config));
    const double elapsed = elapsed_ms(start);
    print_gradient("dQ:", verdict.dq);
    print_gradient("dK:", verdict.dk);
    print_gradient("dV:", verdict.dv);
    print_counters(context, flags, runtime, c, true);
    return conclude(verdict.ok, verdict.describe(), "forward, backward and check", elapsed);
  }
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
  print_counters(context, flags, runtime, c, false);
  return conclude(verdict.ok, verdict.describe(), "kernel and check", elapsed);
}

double minimum_global_bytes(const Attention& a, DType dtype, bool backward) {
  const double element = static_cast<double>(dtype_size(dtype));
  const double out_element = dtype == DType::e4m3 ? 2.0 : element;  // the fp8 forward's bf16 O
  const double rows_q = double(a.batch) * double(a.seqlen_q) * double(a.heads_q);
  const double rows_k = double(a.batch) * double(a.seqlen_k) * double(a.heads_kv);
  const double q = rows_q * double(a.head_dim), o = rows_q * double(a.value_head_dim());
  const double k = rows_k * double(a.head_dim), v = rows_k * double(a.value_head_dim());
  const double lse = double(a.batch) * double(a.heads_q) * double(a.seqlen_q) * 4;
  if (!backward) return (q + k + v) * element + o * out_element + lse;  // Q, K, V in; O, LSE out
  return (q + 2 * o + k + v) * element + lse              // Q, O, dO, K, V and LSE in
         + (q + k + v) * element;                         // dQ, dK, dV out
}

}  // namespace flashjit::tools
