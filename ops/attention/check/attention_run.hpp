#pragma once
// `flashjit run --op attention-forward` and `attention-backward`: dense runs (attention_run.cpp)
// and the inference forms, --paged, --varlen and --append (attention_inference_run.cpp), each
// judged against the float64 reference as the tests judge it (attention_case, backward_case,
// inference_case): the relative L2 error of O (of dQ, dK, dV) must be at most twice that of a
// plain attention (backward) computed in the input dtype. Built into the command.
#include <cstdint>
#include <string>

#include "attention/check/attention_case.hpp"
#include "op_commands.hpp"

namespace flashjit::tools {

/// attention's own options of `flashjit run`.
struct AttentionRunFlags {
  std::string layout = "bshd";
  std::string config;  // empty: the runtime's choice
  bool deterministic = false;
  bool paged = false;  // forward: keys and values in a paged cache
  std::int64_t page_size = 16;
  int varlen = 0;           // this many sequences of random lengths, packed
  int splits = 0;           // inference forward: Sequences::splits (0: chosen)
  std::int64_t append = 0;  // forward: keys each sequence appends to its cache (Sequences::k_new)
  bool rotary = false;      // with append: rotary embedding of q and the new keys
  bool rotary_interleaved = false;
  std::string score_mod;  // Attention::score_mod, also compiled for the float64 reference
  std::string mask_mod;   // Attention::mask_mod, likewise
  std::string kv_dtype;   // forward: "e4m3" for an fp8 cache; empty: --dtype's
  bool seqused = false;   // with --varlen: padding rows past the used ones (seqused_q, seqlens_k)
  bool values_in_keys = false;  // inference forward: v is a view of k's first head_dim_v columns
  float dropout = 0.0f;         // Attention::dropout_p (seed --seed); the reference's mask the same
  bool sinks = false;  // dense: random learnable sinks (Attention::sinks), their gradient checked

  /// Whether the cache is fp8 (--kv-dtype e4m3).
  bool kv_e4m3() const { return kv_dtype == "e4m3"; }
  /// Whether the options choose an inference form (--paged, --varlen, --append or an fp8 cache).
  bool inference() const { return paged || varlen > 0 || append > 0 || kv_e4m3(); }
};

/// The dense case of the options: shape, dtype, layout and seed, checked (InvalidArgument names
/// the option) before anything runs.
testing::ForwardCase forward_case(const RunContext& context, const AttentionRunFlags& flags);

/// The shape line of every attention run, dense or inference: "shape:   batch 2, heads 8 (kv 1),
/// seqlen_q 1, seqlen_k 300, head_dim 64, bf16, bshd, causal", then what the inference forms
/// add (", paged (pages of 16 keys)", ", splits 3"). A length is a list where sequences differ.
struct ShapeLine {
  std::int64_t batch = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  std::string seqlen_q, seqlen_k;
  DType dtype = DType::bf16;
  const char* layout = "bshd";
  bool causal = false;
  std::string extra;
};
void print_shape(const ShapeLine& line);

/// The least global traffic (the --counters minimum) of an attention call in `dtype`: every input
/// read once and every output written once (forward: Q, K, V in; O and LSE out; backward: Q, K, V,
/// O, dO and LSE in; dQ, dK, dV out). Workspaces are not part of the minimum.
double minimum_global_bytes(const Attention& attention, DType dtype, bool backward);

/// A dense forward (or backward, after a forward for O and LSE); returns the exit code.
int run_dense_attention(const RunContext& context, const AttentionRunFlags& flags, bool backward);

/// A dense forward (or backward, with the sinks' gradient) with random learnable sinks
/// (sinks_run.cpp); returns the exit code.
int run_attention_with_sinks(const RunContext& context, const AttentionRunFlags& flags,
                             bool backward);

/// The inference forward (or the varlen backward) of the options; returns the exit code.
int run_inference_attention(const RunContext& context, const AttentionRunFlags& flags,
                            bool backward);

/// `flashjit bench` (attention_bench.cpp): times one attention op the way the autotuner does, or
/// the time to a first result.
Subcommand add_bench_command(CLI::App& app);

}  // namespace flashjit::tools
