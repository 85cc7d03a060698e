#pragma once
// The options of `flashjit run`: their defaults, their registration on the CLI11 command, and
// which runs each applies to, so that an option the chosen op or form does not use is refused
// by name instead of being ignored by a run that then prints PASS.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "run_layer_norm.hpp"

namespace flashjit::tools {

// The default shape takes about a second on the emulator.
struct RunOptions {
  std::int64_t batch = 1;
  std::int64_t heads = 4;
  std::int64_t heads_kv = 0;  // 0: as many as query heads
  std::int64_t seqlen_q = 256;
  std::int64_t seqlen_k = 0;  // 0: seqlen_q
  std::int64_t head_dim = 64;
  std::string dtype = "bf16";
  std::string layout = "bshd";
  bool causal = false;
  bool emulate = false;
  std::string arch;  // the GPU the emulator models; empty: sm_80
  std::uint64_t seed = 1;
  std::string op = "attention-forward";
  bool counters = false;
  std::string config;  // empty: the runtime's choice
  bool deterministic = false;
  int partials = 4;    // merge-states: key ranges the problem is split into
  bool paged = false;  // forward: keys and values in a paged cache
  std::int64_t page_size = 16;
  int varlen = 0;              // forward: this many sequences of random lengths, packed
  int splits = 0;              // inference forward: Sequences::splits (0: chosen)
  LayerNormRun layer_norm;     // layer-norm: rows, cols, norm, fused adds
  std::string mask = "decay";  // multiscale: decay or tensor
};

/// Registers every option of `flashjit run` on `run`, bound to `options`.
void add_run_options(CLI::App& run, RunOptions& options);

/// Whether `options` runs the inference forms (--paged or --varlen) of an attention op.
bool inference_run(const RunOptions& options);

/// Throws InvalidArgument naming the first option given on the command line (`run`, parsed)
/// that the chosen op and form do not use, with the runs it applies to.
void refuse_unused_options(const CLI::App& run, const RunOptions& options);

}  // namespace flashjit::tools
