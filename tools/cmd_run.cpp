// `flashjit run`: one op on random inputs, on the GPU, or on the CPU emulator when there is none
// (or with --emulate), judged against the float64 reference exactly as the tests judge it. The
// command owns the options every op reads and the attention shape several ops read; each op
// brings its runs and its own options (op_commands.hpp), and an option the chosen run does not
// read is refused by name before anything runs.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "flashjit/device.hpp"
#include "flashjit/error.hpp"
#include "op_commands.hpp"
#include "run_support.hpp"

namespace flashjit::tools {
namespace {

/// Every run of every op, in the order the ops are added.
std::vector<const RunOp*> all_runs() { return every_op(&OpCommands::runs); }

/// The options the command registers for every op: the attention-shaped problem's sizes and
/// mask, the row-wise ops' matrix, and the work counters.
void add_shape_options(CLI::App& run, RunShape& shape, RunBasics& basics) {
  run.add_option("--batch", shape.batch, "Batch size")->check(positive_whole_number());
  run.add_option("--heads", shape.heads, "Query heads")->check(positive_whole_number());
  run.add_option("--heads-kv", shape.heads_kv, "Key/value heads (default: --heads)")
      ->check(positive_whole_number());
  run.add_option("--seqlen-q", shape.seqlen_q, "Query length")->check(positive_whole_number());
  run.add_option("--seqlen-k", shape.seqlen_k, "Key length (default: --seqlen-q)")
      ->check(positive_whole_number());
  run.add_option("--head-dim", shape.head_dim, "Head dimension: a multiple of 8 up to 256")
      ->check(positive_whole_number());
  run.add_option("--head-dim-v", shape.head_dim_v,
                 "V's and O's head dimension when it differs from --head-dim (MLA: 192 and "
                 "128): a multiple of 8 up to --head-dim")
      ->check(positive_whole_number());
  run.add_flag("--causal", shape.causal, "Causal mask (bottom-right aligned)");
  run.add_option("--rows", shape.rows, "Row-wise ops: rows (default 64)")
      ->check(positive_whole_number());
  run.add_option("--cols", shape.cols, "Row-wise ops: row length (default 1024)")
      ->check(positive_whole_number());
  run.add_flag("--counters", basics.counters,
               "Print the emulator's work counters of the op's kernels, their ratios to the "
               "problem's minimum and its memory model's figures (bank wavefronts, sector use, "
               "bytes in flight, DRAM bytes; with --emulate, or without a GPU)");
  run.add_option("--counters-json", basics.counters_json,
                 "Write what --counters prints, per kernel and instruction site, to this file as "
                 "JSON");
}

/// Where it runs, on which inputs, and which op.
void add_basic_options(CLI::App& run, RunBasics& basics) {
  const std::string fp32 = op_names(all_runs(), [](const RunOp& op) { return op.takes_fp32; });
  run.add_option("--dtype", basics.dtype,
                 "bf16 or fp16 (" + fp32 + ": fp32 too; attention-forward: e4m3, the fp8 forward)");
  run.add_flag("--emulate", basics.emulate, "Run on the CPU emulator even with a GPU");
  run.add_option("--arch", basics.arch,
                 "The GPU the emulator models and chooses kernels for: sm_80 (default), sm_89 "
                 "(fp8 tensor cores) or sm_90a (where the Hopper path runs); emulator only")
      ->check(CLI::IsMember({"sm_80", "sm_89", "sm_90a"}));
  run.add_option("--seed", basics.seed, "Seed of the random inputs (0 to 2^64 - 1)")
      ->check(whole_number());
  std::vector<std::string> names;
  std::string help;
  for (const RunOp* op : all_runs()) {
    names.push_back(op->name);
    help += (help.empty() ? "" : "; ") + op->name + ": " + op->help;
  }
  run.add_option("--op", basics.op, help)->check(CLI::IsMember(names));
}

/// The options every run reads.
const std::vector<std::string> kAlwaysRead = {"--help",    "--op",   "--dtype",
                                              "--emulate", "--arch", "--seed"};

/// Throws InvalidArgument naming the first given option `op` does not read, with the runs that
/// read it; then lets the op refuse the options its chosen form does not read.
void refuse_unread(const CLI::App& command, const RunOp& op) {
  std::vector<std::string> read = kAlwaysRead;
  read.insert(read.end(), op.options.begin(), op.options.end());
  if (std::ranges::find(op.options, "--counters") != op.options.end()) {
    read.push_back("--counters-json");  // the same counters, as a file
  }
  refuse_unread_option(command, read, op.form ? op.form(command) : "--op " + op.name, all_runs());
  if (op.refuse_unused) op.refuse_unused(command);
}

/// The runtime to run on, after saying which on the first line of output.
Runtime open_runtime(const RunBasics& basics) {
  std::string why = "--emulate";
  if (!basics.emulate) {
    const SystemInfo system = query_system();
    if (!system.devices.empty()) {
      if (!basics.arch.empty()) {
        throw InvalidArgument("--arch", "names the GPU the emulator models: add --emulate");
      }
      const DeviceInfo& gpu = system.devices.front();
      std::printf("backend: GPU 0, %s (%s)\n", gpu.name.c_str(), gpu.arch().c_str());
      return Runtime();
    }
    why = system.unavailable_reason;
  }
  RuntimeOptions emulated{.backend = Backend::emulator};
  emulated.model_memory = basics.counting();
  if (!basics.arch.empty()) emulated.emulated_arch = basics.arch;
  Runtime runtime(emulated);
  std::printf("backend: CPU emulator, not a GPU (%s), modelling %s\n", why.c_str(),
              runtime.device().arch().c_str());
  std::printf(
      "         the same kernel templates compiled for the host, with memory and race "
      "checks; slow, so keep shapes small\n");
  return runtime;
}

struct RunState {
  RunBasics basics;
  RunShape shape;
};

int run_parsed(const CLI::App& command, const RunState& state) {
  const std::vector<const RunOp*> runs = all_runs();
  const auto op =
      std::ranges::find_if(runs, [&](const RunOp* run) { return run->name == state.basics.op; });
  if (op == runs.end()) throw InvalidArgument("--op", "'" + state.basics.op + "' is not an op");
  refuse_unread(command, **op);
  if (state.basics.counting() && !state.basics.emulate && !query_system().devices.empty()) {
    throw InvalidArgument(state.basics.counters ? "--counters" : "--counters-json",
                          "counts the emulator's work: add --emulate");
  }
  const RunContext context{command, state.basics, state.shape,
                           [&] { return open_runtime(state.basics); }};
  return (*op)->run(context);
}

}  // namespace

std::string first_unread_option(const CLI::App& command, const std::vector<std::string>& read) {
  for (const CLI::Option* option : command.get_options()) {
    if (option->count() == 0) continue;
    if (std::ranges::find(read, option->get_name()) == read.end()) return option->get_name();
  }
  return "";
}

Subcommand add_run_command(CLI::App& app) {
  auto state = std::make_shared<RunState>();
  CLI::App* run = app.add_subcommand(
      "run",
      "Run one op (by default an attention forward) on random inputs (on the GPU, else on the "
      "CPU emulator) and check it against a float64 reference");
  add_shape_options(*run, state->shape, state->basics);
  add_basic_options(*run, state->basics);
  for (const OpCommands& op : op_commands()) {
    if (op.add_run_options) op.add_run_options(*run);
  }
  return {run, [state, run] { return run_parsed(*run, *state); }};
}

}  // namespace flashjit::tools
