#pragma once
// What an op brings to the `flashjit` command: its `run` cases and its `autotune` problems, with
// the options each reads, and any subcommand of its own. Each op declares its own in its folder (ops/<op>/<op>_commands.cpp,
// listed by flashjit_op_commands in the op's CMakeLists.txt); `run` and `autotune` walk
// op_commands() and name no op. An option the chosen op does not read is refused by name.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autotune/tuning_problem.hpp"
#include "commands.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::tools {

/// The options of `flashjit run` every op reads.
struct RunBasics {
  std::string op = "attention-forward";
  std::string dtype = "bf16";
  bool emulate = false;
  std::string arch;  // the GPU the emulator models; empty: sm_80
  std::uint64_t seed = 1;
  bool counters = false;       // read by the ops that list "--counters"
  std::string counters_json;  // --counters-json: where to write them as JSON (those ops too)

  /// Whether the work counters are asked for, printed or as JSON.
  bool counting() const { return counters || !counters_json.empty(); }
};

/// The problem-shape options of `flashjit run`, which several ops read (those that list them):
/// an attention-shaped problem's sizes and mask, and a matrix's rows for the row-wise ops. The
/// default shapes take about a second on the emulator.
struct RunShape {
  std::int64_t batch = 1;
  std::int64_t heads = 4;
  std::int64_t heads_kv = 0;  // 0: as many as query heads
  std::int64_t seqlen_q = 256;
  std::int64_t seqlen_k = 0;  // 0: seqlen_q
  std::int64_t head_dim = 64;
  std::int64_t head_dim_v = 0;  // 0: head_dim
  bool causal = false;
  std::int64_t rows = 64;    // the row-wise ops' matrix: rows
  std::int64_t cols = 1024;  // and row length
};

/// What a run gets once the command line is parsed: the command (to ask which options were
/// given), the shared options' values, and the runtime to run on, opened on the first call
/// after saying which on the first line of output.
struct RunContext {
  const CLI::App& command;
  const RunBasics& basics;
  const RunShape& shape;
  std::function<Runtime()> open_runtime;
};

/// One `--op` of `flashjit run`.
struct RunOp {
  std::string name;         // the --op value
  std::string help;         // what it runs, for --op's help
  bool takes_fp32 = false;  // whether it runs in fp32 too (bf16 and fp16: all do), for --dtype
  /// The options it reads beyond --op, --dtype, --emulate, --arch and --seed: shared ones
  /// ("--batch", "--counters") and its op's own. Any other option given is refused.
  std::vector<std::string> options;
  /// The form the given options choose ("dense", "--paged"), for messages; may be empty.
  std::function<std::string(const CLI::App& command)> form;
  /// Throws InvalidArgument for an option it lists that the chosen form does not read; may be
  /// empty.
  std::function<void(const CLI::App& command)> refuse_unused;
  std::function<int(const RunContext& context)> run;
};

/// The options of `flashjit autotune` that several tuned ops read, parsed.
struct TuneShape {
  std::vector<int> head_dims;
  std::vector<std::int64_t> seqlens;
  std::vector<std::int64_t> batch_heads;
  std::vector<bool> causal;  // each value --causal asks for
  std::int64_t heads = 16;
  std::int64_t heads_kv = 0;  // 0: heads
};

using ProblemList = std::vector<std::shared_ptr<const autotune::TuningProblem>>;

/// One `--op` of `flashjit autotune` (a name of kernels::tuned_op_names()).
struct TuneOp {
  std::string name;
  bool takes_fp32 = false;  // whether it runs in fp32 too (bf16 and fp16: all do), for --dtype
  /// The options it reads beyond the ones every tuned op reads (--op, --dtype, --jobs,
  /// --budget-ms, --only, --db, --plan, --arch, --emulate).
  std::vector<std::string> options;
  /// Appends its problems at one dtype, in a fixed order; throws InvalidArgument naming the
  /// option of a value it cannot tune.
  std::function<void(const TuneShape& shape, DType dtype, ProblemList& list)> add_problems;
};

/// One op's part of the command.
struct OpCommands {
  /// Registers the op's own options of `run` (bound to its own storage); may be empty.
  std::function<void(CLI::App& run)> add_run_options;
  std::vector<RunOp> runs;
  /// Registers the op's own options of `autotune`; may be empty.
  std::function<void(CLI::App& autotune)> add_autotune_options;
  std::vector<TuneOp> tunes;
  /// Subcommands of its own (attention's `bench`), each registered on the command's app.
  std::vector<std::function<Subcommand(CLI::App& app)>> add_commands;
};

/// Every op's commands, built once, in the order the ops' folders are added.
const std::vector<OpCommands>& op_commands();

/// Every op's entries of one kind (`&OpCommands::runs`, `&OpCommands::tunes`), in order.
template <class Op>
std::vector<const Op*> every_op(std::vector<Op> OpCommands::*kind) {
  std::vector<const Op*> all;
  for (const OpCommands& op : op_commands()) {
    for (const Op& entry : op.*kind) all.push_back(&entry);
  }
  return all;
}

/// "a, b, c": the names of the entries of `ops` that `keep` accepts.
template <class Op, class Keep>
std::string op_names(const std::vector<const Op*>& ops, Keep keep) {
  std::string names;
  for (const Op* op : ops) {
    if (keep(*op)) names += (names.empty() ? "" : ", ") + op->name;
  }
  return names;
}

/// The first option given on `command` (parsed; in the order they were registered) that is
/// not in `read`, or "" when every given option is.
std::string first_unread_option(const CLI::App& command, const std::vector<std::string>& read);

/// Throws InvalidArgument naming the first option given on `command` that is not in `read`,
/// saying it does not apply to `chosen` and which entries of `ops` read it.
template <class Op>
void refuse_unread_option(const CLI::App& command, const std::vector<std::string>& read,
                          const std::string& chosen, const std::vector<const Op*>& ops) {
  const std::string option = first_unread_option(command, read);
  if (option.empty()) return;
  const std::string readers = op_names(ops, [&](const Op& op) {
    return std::find(op.options.begin(), op.options.end(), option) != op.options.end();
  });
  throw InvalidArgument(option, "does not apply to " + chosen + "; it applies to --op " + readers);
}

}  // namespace flashjit::tools
