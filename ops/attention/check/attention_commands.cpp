// attention's part of the `flashjit` command: the runs of attention-forward and
// attention-backward (dense, and the inference forms --paged and --varlen), their own options,
// and the problems of attention-forward, attention-backward and attention-decode that
// `flashjit autotune` times.
#include <memory>

#include "attention/attention_tuning.hpp"
#include "attention/check/attention_run.hpp"
#include "attention/check/host_modifiers.hpp"
#include "attention/inference/attention_inference_config.hpp"
#include "attention/inference/decode_tuning.hpp"
#include "flashjit/error.hpp"
#include "run_support.hpp"
#include "tune_support.hpp"

namespace flashjit::tools {
namespace {

void add_run_options(CLI::App& run, AttentionRunFlags& flags) {
  run.add_option("--layout", flags.layout,
                 "bshd ([B, L, H, D]) or bhsd ([B, H, L, D]); dense attention runs only")
      ->check(CLI::IsMember({"bshd", "bhsd"}));
  run.add_option("--config", flags.config,
                 "Dense attention runs: this config of the op's space instead of the runtime's "
                 "choice, named as `flashjit autotune --plan` prints it (br64.bc32.w4.s1 "
                 "forward, br64.bc128.w8.s2 backward, br64.bc128.w8.s2.dq.br64.bc64.w4 with "
                 "--deterministic); on the emulator, one it was not built with is compiled for "
                 "the host first");
  run.add_flag("--deterministic", flags.deterministic,
               "Backward only (Attention::deterministic): dQ from a kernel of its own, the same "
               "bits on every run, instead of atomic adds into an fp32 sum");
  run.add_flag("--paged", flags.paged,
               "Forward with keys and values in a paged KV cache (shuffled pages of "
               "--page-size keys, a page table and per-sequence lengths)");
  run.add_option("--page-size", flags.page_size, "--paged: keys per page, 1 or more (default 16)")
      ->check(positive_whole_number());
  run.add_option("--append", flags.append,
                 "Forward: the last N keys of each sequence arrive with the call and are written "
                 "into the cache (dense, or --paged) before the attention (Sequences::k_new); "
                 "the cache is checked afterwards")
      ->check(positive_whole_number());
  run.add_flag("--rotary", flags.rotary,
               "With --append: rotary embedding (RoPE) of q and the new keys, pairs (i, i + d/2)");
  run.add_option("--score-mod", flags.score_mod,
                 "A score modifier, a C++ expression of score, b, h, q_idx and kv_idx "
                 "(Attention::score_mod), compiled into the kernels (forward or backward) and, "
                 "for the float64 reference, for the host");
  run.add_option("--mask-mod", flags.mask_mod,
                 "A mask modifier, a boolean C++ expression of b, h, q_idx and kv_idx "
                 "(Attention::mask_mod), likewise");
  run.add_flag("--rotary-interleaved", flags.rotary_interleaved,
               "With --append: rotary embedding with pairs (2i, 2i + 1), FlashAttention's default");
  run.add_option("--varlen", flags.varlen,
                 "Forward (or backward) over N sequences of random lengths up to --seqlen-q and "
                 "--seqlen-k (0 and 1 among them), packed without padding (cu_seqlens)")
      ->check(CLI::Range(1, 65535));
  run.add_flag("--seqused", flags.seqused,
               "With --varlen: each sequence's packed rows hold up to 8 NaN rows past its used "
               "queries and keys (Sequences::seqused_q and seqlens_k), which must not be read "
               "and must come out as o 0, lse -inf (gradients 0)");
  run.add_option("--kv-dtype", flags.kv_dtype,
                 "Forward: the KV cache's dtype, e4m3 for an fp8 cache (Sequences::k_descale: "
                 "per-head descale factors; dense, or --paged, or --varlen); the reference "
                 "attends to the dequantized cache with --dtype's bound")
      ->check(CLI::IsMember({"e4m3"}));
  run.add_flag("--values-in-keys", flags.values_in_keys,
               "Forward with --paged or --varlen: v is k's first --head-dim-v columns in the "
               "same memory, as in MLA's latent cache (head dims 576 and 512): each key row's "
               "first columns are its value, and the forward loads the keys once for both");
  run.add_option("--dropout", flags.dropout,
                 "Dense and --varlen runs: dropout on the probabilities with this p in [0, 1) "
                 "(Attention::dropout_p, seeded by --seed, offset 0), checked against the float64 "
                 "reference with the same mask regenerated on the host");
  run.add_flag("--sinks", flags.sinks,
               "Dense runs: learnable attention sinks (random logits, one a query head) in every "
               "row's softmax denominator, checked with O and LSE (and after the backward with "
               "the sinks' gradient) against the float64 reference");
  run.add_option("--splits", flags.splits,
                 "Forward with --paged or --varlen: split each query block's keys across this "
                 "many CTAs (1 to 64; default: chosen from the SM count)")
      ->check(CLI::Range(1, 64));
}

/// "--op attention-forward, dense" or "--op attention-forward --paged --varlen".
std::string form(const std::string& op, const AttentionRunFlags& flags) {
  std::string run = "--op " + op;
  if (!flags.inference()) return run + ", dense";
  if (flags.paged) run += " --paged";
  if (flags.varlen > 0) run += " --varlen";
  if (flags.append > 0) run += " --append";
  if (flags.kv_e4m3()) run += " --kv-dtype e4m3";
  if (flags.seqused) run += " --seqused";
  if (flags.values_in_keys) run += " --values-in-keys";
  return run;
}

/// An option an attention run lists but reads in some forms only, and where it applies.
struct FormUse {
  const char* option;
  bool applies;
  const char* where;
};

void refuse_in_form(const CLI::App& command, const std::string& op, const AttentionRunFlags& flags,
                    const std::vector<FormUse>& uses) {
  for (const FormUse& use : uses) {
    if (use.applies || command.count(use.option) == 0) continue;
    throw InvalidArgument(use.option,
                          "does not apply to " + form(op, flags) + "; it applies to " + use.where);
  }
}

RunOp attention_run(bool backward, std::shared_ptr<AttentionRunFlags> flags) {
  const std::string name = backward ? "attention-backward" : "attention-forward";
  RunOp op;
  op.name = name;
  op.help = backward ? "an attention backward after a forward for O and LSE; checks dQ, dK, dV "
                       "(--deterministic; --varlen)"
                     : "an attention forward (--paged, --varlen, --splits: the inference forms)";
  op.options = {"--batch",    "--heads",     "--heads-kv", "--seqlen-q",   "--seqlen-k",
                "--head-dim", "--causal",    "--counters", "--layout",     "--config",
                "--varlen",   "--score-mod", "--mask-mod", "--head-dim-v", "--seqused",
                "--sinks",    "--dropout"};
  if (backward) {
    op.options.push_back("--deterministic");
  } else {
    op.options.insert(op.options.end(),
                      {"--paged", "--page-size", "--splits", "--append", "--rotary",
                       "--rotary-interleaved", "--kv-dtype", "--values-in-keys"});
  }
  op.form = [name, flags](const CLI::App&) { return form(name, *flags); };
  op.refuse_unused = [name, flags, backward](const CLI::App& command) {
    const AttentionRunFlags& f = *flags;
    refuse_in_form(
        command, name, f,
        {{"--batch", f.varlen == 0,
          "every attention run without --varlen (whose N is the number of sequences)"},
         {"--layout", !f.inference(),
          "attention runs without --paged, --varlen, --append or --kv-dtype"},
         {"--config", !f.inference(),
          "attention runs without --paged, --varlen, --append or --kv-dtype"},
         {"--counters", !(backward && f.varlen > 0), "attention runs but the --varlen backward"},
         {"--counters-json", !(backward && f.varlen > 0),
          "attention runs but the --varlen backward"},
         {"--page-size", f.paged, "attention-forward with --paged"},
         {"--splits", f.inference(), "attention-forward with --paged, --varlen or --append"},
         {"--rotary", f.append > 0, "attention-forward with --append"},
         {"--rotary-interleaved", f.append > 0, "attention-forward with --append"},
         {"--seqused", f.varlen > 0 && !f.paged, "attention runs with --varlen, without --paged"},
         {"--sinks", !f.inference(),
          "attention runs without --paged, --varlen, --append or --kv-dtype"},
         {"--dropout", !f.paged && f.append == 0 && !f.kv_e4m3(),
          "attention runs without --paged, --append or --kv-dtype"},
         {"--values-in-keys", (f.paged || f.varlen > 0) && f.append == 0 && !f.kv_e4m3(),
          "attention-forward with --paged or --varlen, without --append or --kv-dtype"}});
  };
  op.run = [flags, backward](const RunContext& context) {
    if (flags->sinks && !flags->inference()) {
      return run_attention_with_sinks(context, *flags, backward);
    }
    return flags->inference() ? run_inference_attention(context, *flags, backward)
                              : run_dense_attention(context, *flags, backward);
  };
  return op;
}

/// attention's own options of `flashjit autotune`: the backward's mode and decoding's shapes.
struct AttentionTuneFlags {
  bool deterministic = false;
  // attention-decode: batch, query tokens per sequence, keys per page (0: a dense cache);
  // --seqlen is the context.
  std::vector<std::int64_t> batches = {8};
  std::vector<std::int64_t> queries = {1};
  std::int64_t page_size = 16;
  // attention-forward and -backward: the calls' modifiers, compiled into every candidate.
  std::string score_mod;
  std::string mask_mod;
  float dropout = 0.0f;  // Attention::dropout_p
};

void add_tune_options(CLI::App& cmd, AttentionTuneFlags& flags) {
  cmd.add_flag("--deterministic", flags.deterministic,
               "attention-backward: tune the deterministic mode (its own dQ kernel's tiles too)");
  cmd.add_option("--batch", flags.batches, "attention-decode: batch sizes")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--queries", flags.queries, "attention-decode: query tokens per sequence (1-16)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--page-size", flags.page_size,
                 "attention-decode: keys per page of the cache (0: a dense cache)")
      ->capture_default_str();
  cmd.add_option("--score-mod", flags.score_mod,
                 "attention-forward and -backward: tune calls with this score modifier "
                 "(Attention::score_mod; no captures), compiled into every candidate; the "
                 "database keys it apart");
  cmd.add_option("--mask-mod", flags.mask_mod,
                 "attention-forward and -backward: tune calls with this mask modifier, likewise");
  cmd.add_option("--dropout", flags.dropout,
                 "attention-forward and -backward: tune calls with dropout of this p (the "
                 "mma.sync kernels, which carry it); the database keys it apart");
}

const std::vector<std::string> kTuneShapeOptions = {"--head-dim", "--seqlen",   "--batch-heads",
                                                    "--heads",    "--heads-kv", "--causal"};

TuneOp attention_tune(bool backward, std::shared_ptr<AttentionTuneFlags> flags) {
  TuneOp op;
  op.name = backward ? "attention-backward" : "attention-forward";
  op.options = kTuneShapeOptions;
  op.options.insert(op.options.end(), {"--score-mod", "--mask-mod", "--dropout"});
  if (backward) op.options.push_back("--deterministic");
  op.add_problems = [backward, flags](const TuneShape& shape, DType dtype, ProblemList& list) {
    check_modifier_options(flags->score_mod, flags->mask_mod);
    for (Attention a : tune_attentions(shape)) {
      a.deterministic = backward && flags->deterministic;
      a.score_mod = flags->score_mod;
      a.mask_mod = flags->mask_mod;
      a.dropout_p = flags->dropout;
      list.push_back(std::make_shared<kernels::AttentionProblem>(backward, dtype, a));
    }
  };
  return op;
}

/// attention-decode's problems: each head dim, causal value, query count, context and batch, on
/// the paged cache --page-size names (or a dense one with per-sequence lengths).
TuneOp decode_tune(std::shared_ptr<AttentionTuneFlags> flags) {
  TuneOp op;
  op.name = "attention-decode";
  op.options = {"--head-dim", "--seqlen", "--heads",   "--heads-kv",
                "--causal",   "--batch",  "--queries", "--page-size"};
  op.add_problems = [flags](const TuneShape& shape, DType dtype, ProblemList& list) {
    const AttentionTuneFlags& f = *flags;
    if (f.page_size < 0) {
      throw InvalidArgument("--page-size", "is " + std::to_string(f.page_size) +
                                               "; must be a count of keys, or 0 for a dense cache");
    }
    for (int head_dim : shape.head_dims) {
      for (bool causal : shape.causal) {
        for (std::int64_t queries : f.queries) {
          if (queries < 1 || queries > kernels::kMaxDecodeQueries) {
            throw InvalidArgument("--queries", "is " + std::to_string(queries) +
                                                   "; a decoding call has 1 to " +
                                                   std::to_string(kernels::kMaxDecodeQueries));
          }
          for (std::int64_t context : shape.seqlens) {
            for (std::int64_t batch : f.batches) {
              Attention a;
              a.batch = batch;
              a.heads_q = shape.heads;
              a.heads_kv = shape.heads_kv > 0 ? shape.heads_kv : shape.heads;
              a.seqlen_q = queries;
              a.seqlen_k = context;
              a.head_dim = head_dim;
              a.causal = causal;
              check_tune_attention(a, "--batch", "--queries");
              list.push_back(std::make_shared<kernels::DecodeProblem>(
                  dtype, a, kernels::CacheLayout{true, f.page_size}));
            }
          }
        }
      }
    }
  };
  return op;
}

}  // namespace

OpCommands attention_commands() {
  auto run_flags = std::make_shared<AttentionRunFlags>();
  auto tune_flags = std::make_shared<AttentionTuneFlags>();
  OpCommands commands;
  commands.add_run_options = [run_flags](CLI::App& run) { add_run_options(run, *run_flags); };
  commands.runs = {attention_run(false, run_flags), attention_run(true, run_flags)};
  commands.add_autotune_options = [tune_flags](CLI::App& cmd) {
    add_tune_options(cmd, *tune_flags);
  };
  commands.tunes = {attention_tune(false, tune_flags), attention_tune(true, tune_flags),
                    decode_tune(tune_flags)};
  commands.add_commands = {add_bench_command};
  return commands;
}

}  // namespace flashjit::tools
