#include "run_options.hpp"

#include <charconv>
#include <functional>
#include <vector>

#include "flashjit/error.hpp"

namespace flashjit::tools {
namespace {

const CLI::Validator kWholeNumber(
    [](const std::string& text) {
      std::uint64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      return error == std::errc() && end == text.data() + text.size()
                 ? std::string()
                 : "must be a whole number from 0 to 2^64 - 1, not '" + text + "'";
    },
    "N >= 0");

const CLI::Validator kPositive(
    [](const std::string& text) {
      return text.find_first_not_of("0123456789") == std::string::npos &&
                     text.find_first_not_of('0') != std::string::npos
                 ? std::string()
                 : "must be a whole number of at least 1, not '" + text + "'";
    },
    "N >= 1");

/// The attention problem's sizes, its dtype, layout and mask.
void add_shape_options(CLI::App& run, RunOptions& options) {
  run.add_option("--batch", options.batch, "Batch size")->check(kPositive);
  run.add_option("--heads", options.heads, "Query heads")->check(kPositive);
  run.add_option("--heads-kv", options.heads_kv, "Key/value heads (default: --heads)")
      ->check(kPositive);
  run.add_option("--seqlen-q", options.seqlen_q, "Query length")->check(kPositive);
  run.add_option("--seqlen-k", options.seqlen_k, "Key length (default: --seqlen-q)")
      ->check(kPositive);
  run.add_option("--head-dim", options.head_dim, "Head dimension: a multiple of 8 up to 256")
      ->check(kPositive);
  run.add_option("--dtype", options.dtype, "bf16 or fp16 (merge-states and layer-norm: fp32 too)");
  run.add_option("--layout", options.layout,
                 "bshd ([B, L, H, D]) or bhsd ([B, H, L, D]); dense attention runs only")
      ->check(CLI::IsMember({"bshd", "bhsd"}));
  run.add_flag("--causal", options.causal, "Causal mask (bottom-right aligned)");
}

/// Where it runs, on which inputs, and which op.
void add_run_target_options(CLI::App& run, RunOptions& options) {
  run.add_flag("--emulate", options.emulate, "Run on the CPU emulator even with a GPU");
  run.add_option("--arch", options.arch,
                 "The GPU the emulator models and chooses kernels for: sm_80 (default) or "
                 "sm_90a (where the Hopper path runs); emulator only")
      ->check(CLI::IsMember({"sm_80", "sm_90a"}));
  run.add_option("--seed", options.seed, "Seed of the random inputs (0 to 2^64 - 1)")
      ->check(kWholeNumber);
  run.add_option("--op", options.op,
                 "attention-forward, attention-backward (after a forward for O and LSE; "
                 "checks dQ, dK, dV), merge-states (the keys split into --partials ranges, "
                 "their fp32 partial states merged into --dtype, checked against the unsplit "
                 "attention), or layer-norm (forward and backward of --rows x --cols, --dtype "
                 "also fp32, with --rms, --bias, --residual), or multiscale "
                 "(forward and backward, --mask decay or tensor)")
      ->check(CLI::IsMember(
          {"attention-forward", "attention-backward", "merge-states", "layer-norm", "multiscale"}));
  run.add_flag("--counters", options.counters,
               "Print the emulator's work counters of the op's kernels and their ratios to the "
               "problem's minimum (with --emulate, or without a GPU)");
}

/// The options of one op each: multiscale, merge-states, layer-norm.
void add_other_op_options(CLI::App& run, RunOptions& options) {
  run.add_option("--mask", options.mask,
                 "multiscale: decay (γ per head, generated in the kernel; default) or "
                 "tensor (an fp32 [heads, seqlen_q, seqlen_k] mask, its gradient checked too)")
      ->check(CLI::IsMember({"decay", "tensor"}));
  run.add_option("--partials", options.partials,
                 "merge-states: key ranges to split the problem into (1 to 64; default 4)")
      ->check(CLI::Range(1, 64));
  run.add_option("--rows", options.layer_norm.rows, "layer-norm: rows (default 64)")
      ->check(kPositive);
  run.add_option("--cols", options.layer_norm.cols,
                 "layer-norm: row length, 1 to 65536 (default 1024)")
      ->check(kPositive);
  run.add_flag("--rms", options.layer_norm.rms, "layer-norm: RMS norm (no mean, no beta)");
  run.add_flag("--bias", options.layer_norm.bias,
               "layer-norm: fuse a [cols] bias add before the norm");
  run.add_flag("--residual", options.layer_norm.residual,
               "layer-norm: fuse a [rows, cols] residual add before the norm (the sum is written "
               "and checked)");
}

/// The attention ops' kernel choice and their inference forms.
void add_attention_options(CLI::App& run, RunOptions& options) {
  run.add_option("--config", options.config,
                 "Dense attention runs: this config of the op's space instead of the runtime's "
                 "choice, named as `flashjit autotune --plan` prints it (br64.bc32.w4.s1 "
                 "forward, br64.bc128.w8.s2 backward, br64.bc128.w8.s2.dq.br64.bc64.w4 with "
                 "--deterministic); on the emulator, one it was not built with is compiled for "
                 "the host first");
  run.add_flag("--deterministic", options.deterministic,
               "Backward only (Attention::deterministic): dQ from a kernel of its own, the same "
               "bits on every run, instead of atomic adds into an fp32 sum");
  run.add_flag("--paged", options.paged,
               "Forward with keys and values in a paged KV cache (shuffled pages of "
               "--page-size keys, a page table and per-sequence lengths)");
  run.add_option("--page-size", options.page_size,
                 "--paged: keys per page, a multiple of 16 (default 16)")
      ->check(kPositive);
  run.add_option("--varlen", options.varlen,
                 "Forward (or backward) over N sequences of random lengths up to --seqlen-q and "
                 "--seqlen-k (0 and 1 among them), packed without padding (cu_seqlens)")
      ->check(CLI::Range(1, 65535));
  run.add_option("--splits", options.splits,
                 "Forward with --paged or --varlen: split each query block's keys across this "
                 "many CTAs (1 to 64; default: chosen from the SM count)")
      ->check(CLI::Range(1, 64));
}

bool attention_op(const RunOptions& o) {
  return o.op == "attention-forward" || o.op == "attention-backward";
}
bool dense_attention(const RunOptions& o) { return attention_op(o) && !inference_run(o); }
bool inference_forward(const RunOptions& o) {
  return o.op == "attention-forward" && inference_run(o);
}

/// An option and the runs that use it (`where` says which, for the message).
struct OptionUse {
  std::vector<const char*> options;
  std::function<bool(const RunOptions&)> applies;
  const char* where;
};

/// Every option that some run leaves unused; --emulate, --arch, --seed, --op and --dtype are
/// used by all.
const std::vector<OptionUse>& option_uses() {
  static const std::vector<OptionUse> uses = {
      {{"--batch"},
       [](const RunOptions& o) {
         return o.op != "layer-norm" && !(attention_op(o) && o.varlen > 0);
       },
       "every op but layer-norm, without --varlen (whose N is the number of sequences)"},
      {{"--heads", "--heads-kv", "--seqlen-q", "--seqlen-k", "--head-dim"},
       [](const RunOptions& o) { return o.op != "layer-norm"; },
       "every op but layer-norm (whose shape is --rows x --cols)"},
      {{"--causal"},
       [](const RunOptions& o) { return attention_op(o) || o.op == "merge-states"; },
       "attention-forward, attention-backward and merge-states (multiscale's decay "
       "mask is causal already)"},
      {{"--layout", "--config"},
       dense_attention,
       "attention-forward and attention-backward without --paged or --varlen"},
      {{"--counters"},
       [](const RunOptions& o) {
         return attention_op(o) && !(o.op == "attention-backward" && o.varlen > 0);
       },
       "attention-forward and attention-backward, but not the --varlen backward"},
      {{"--deterministic"},
       [](const RunOptions& o) { return o.op == "attention-backward"; },
       "attention-backward"},
      {{"--paged"},
       [](const RunOptions& o) { return o.op == "attention-forward"; },
       "attention-forward"},
      {{"--page-size"},
       [](const RunOptions& o) { return o.op == "attention-forward" && o.paged; },
       "attention-forward with --paged"},
      {{"--varlen"}, attention_op, "attention-forward and attention-backward"},
      {{"--splits"}, inference_forward, "attention-forward with --paged or --varlen"},
      {{"--mask"}, [](const RunOptions& o) { return o.op == "multiscale"; }, "multiscale"},
      {{"--partials"}, [](const RunOptions& o) { return o.op == "merge-states"; }, "merge-states"},
      {{"--rows", "--cols", "--rms", "--bias", "--residual"},
       [](const RunOptions& o) { return o.op == "layer-norm"; },
       "layer-norm"},
  };
  return uses;
}

/// "--op attention-forward, dense": the run the options chose, for messages.
std::string run_description(const RunOptions& o) {
  std::string run = "--op " + o.op;
  if (!attention_op(o)) return run;
  if (!inference_run(o)) return run + ", dense";
  if (o.paged) run += " --paged";
  if (o.varlen > 0) run += " --varlen";
  return run;
}

}  // namespace

void add_run_options(CLI::App& run, RunOptions& options) {
  add_shape_options(run, options);
  add_run_target_options(run, options);
  add_other_op_options(run, options);
  add_attention_options(run, options);
}

bool inference_run(const RunOptions& options) {
  return attention_op(options) && (options.paged || options.varlen > 0);
}

void refuse_unused_options(const CLI::App& run, const RunOptions& options) {
  for (const OptionUse& use : option_uses()) {
    if (use.applies(options)) continue;
    for (const char* option : use.options) {
      if (run.count(option) == 0) continue;
      throw InvalidArgument(option, std::string("does not apply to ") + run_description(options) +
                                        "; it applies to " + use.where);
    }
  }
}

}  // namespace flashjit::tools
