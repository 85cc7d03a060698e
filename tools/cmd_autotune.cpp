// `flashjit autotune`: fills the tuning database ahead of time (docs/autotuning.md), lists the
// candidates without a GPU (--plan), and prints the database (show). Each tuned op brings its
// problems and its own options (op_commands.hpp); an option no chosen op reads is refused.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/runtime_parts.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_state.hpp"
#include "commands.hpp"
#include "flashjit/error.hpp"
#include "format.hpp"
#include "op_commands.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::tools {
namespace {

/// The options of `flashjit autotune` the command owns; each op registers its own (--rows,
/// --queries, --mask, ...) and reads the attention shapes of `shape`.
struct AutotuneOptions {
  std::vector<std::string> ops = {"attention-forward"};
  TuneShape shape{.head_dims = {128},
                  .seqlens = {4096},
                  .batch_heads = {32},
                  .causal = {},
                  .heads = 16,
                  .heads_kv = 0};
  std::vector<std::string> dtypes = {"bf16"};
  std::string causal = "false";
  int jobs = detail::default_workers();
  double budget_ms = 250;
  bool plan = false;
  bool warm = false;
  std::string arch;
  bool emulate = false;
  std::vector<std::string> only;
  std::string database;
};

/// Every op's tuner, in the order the ops are added.
std::vector<const TuneOp*> all_tunes() { return every_op(&OpCommands::tunes); }

/// "attention-forward, attention-backward, ...": the ops the autotuner tunes.
std::string tuned_names() {
  return op_names(all_tunes(), [](const TuneOp&) { return true; });
}

/// The tuner of `name`; else InvalidArgument("--op") listing them.
const TuneOp& tune_op(const std::string& name) {
  for (const TuneOp* tune : all_tunes()) {
    if (tune->name == name) return *tune;
  }
  throw InvalidArgument("--op",
                        "'" + name + "' is not a tunable op; the autotuner tunes " + tuned_names());
}

/// The options every tuned op reads.
const std::vector<std::string> kAlwaysRead = {"--help",      "--op",   "--dtype",  "--jobs",
                                              "--budget-ms", "--only", "--db",     "--plan",
                                              "--warm",      "--arch", "--emulate"};

/// Throws InvalidArgument naming the first option given that none of `ops` reads.
void refuse_unread(const CLI::App& command, const std::vector<const TuneOp*>& ops) {
  std::vector<std::string> read = kAlwaysRead;
  std::string chosen;
  for (const TuneOp* op : ops) {
    read.insert(read.end(), op->options.begin(), op->options.end());
    chosen += (chosen.empty() ? "--op " : ",") + op->name;
  }
  refuse_unread_option(command, read, chosen, all_tunes());
}

// Every problem the options describe, in a fixed order: op, dtype, then the op's own order.
ProblemList problems(const CLI::App& command, const AutotuneOptions& o) {
  std::vector<const TuneOp*> ops;
  for (const std::string& name : o.ops) ops.push_back(&tune_op(name));
  refuse_unread(command, ops);
  TuneShape shape = o.shape;
  if (o.causal == "both")
    shape.causal = {false, true};
  else if (o.causal == "true")
    shape.causal = {true};
  else if (o.causal == "false")
    shape.causal = {false};
  else
    throw InvalidArgument("--causal", "'" + o.causal + "': use true, false or both");
  ProblemList list;
  for (const TuneOp* op : ops) {
    for (const std::string& dtype : o.dtypes) {
      op->add_problems(shape, parse_dtype(dtype, "--dtype"), list);
    }
  }
  return list;
}

// A progress bar on a terminal, a plain line per tenth of the work otherwise.
class Progress {
 public:
  Progress() : terminal_(isatty(STDERR_FILENO) != 0) {}
  void operator()(const char* phase, int done, int total) {
    if (terminal_) {
      constexpr int kWidth = 30;
      const int filled = total > 0 ? done * kWidth / total : kWidth;
      std::fprintf(stderr, "\r  %-8s [%s%s] %d/%d", phase, std::string(filled, '#').c_str(),
                   std::string(kWidth - filled, '.').c_str(), done, total);
      if (done == total) std::fputc('\n', stderr);
    } else if (done == total || done * 4 / total != (done - 1) * 4 / total) {  // quarters
      std::fprintf(stderr, "  %s %d/%d\n", phase, done, total);
    }
    std::fflush(stderr);
  }

 private:
  bool terminal_;
};

void print_report(const autotune::TuneReport& report) {
  // A decoding call (its reads of the cache) and a layer norm (its tensors read and written)
  // are bound by memory: GB/s says how close they get.
  const bool memory_bound = report.bytes > 0;
  const double work = memory_bound ? report.bytes : report.flops;
  std::printf("  %-30s %10s %9s  %s\n", "config", "ms", memory_bound ? "GB/s" : "TFLOP/s",
              "status");
  for (const autotune::CandidateTiming& t : report.timings) {
    const bool winner = t.config == report.entry.winner;
    const bool fallback = t.config == report.entry.default_config;
    if (std::isfinite(t.median_ms)) {
      std::printf("%s %-30s %10.4f %9.1f  %s%s\n", winner ? "*" : " ", t.config.c_str(),
                  t.median_ms, work / (t.median_ms * (memory_bound ? 1e6 : 1e9)), t.status.c_str(),
                  fallback ? " (default)" : "");
    } else {
      std::printf("  %-30s %10s %9s  %s%s\n", t.config.c_str(), "-", "-", t.status.c_str(),
                  fallback ? " (default)" : "");
    }
  }
  for (const autotune::Candidate& c : report.candidates) {
    if (!c.pruned.empty()) std::printf("  %-30s pruned: %s\n", c.name.c_str(), c.pruned.c_str());
  }
  std::printf("winner: %s%s\n", report.entry.winner.c_str(),
              report.entry.winner == report.entry.default_config ? " (the default)" : "");
  if (!report.database.empty()) {
    std::printf("database: %s\n", report.database.c_str());
  } else {
    std::printf("database: not written: %s\n", report.persist_problem.c_str());
  }
}

int run_tune(const CLI::App& command, const AutotuneOptions& options) {
  RuntimeOptions runtime_options;
  runtime_options.backend = options.emulate ? Backend::emulator : Backend::cuda;
  if (!options.emulate && query_system().devices.empty()) {
    std::fprintf(stderr,
                 "flashjit: error: autotune times kernels on a GPU and there is none here (%s); "
                 "nothing was written. `flashjit autotune --plan --arch sm_90a` lists the "
                 "candidates without one.\n",
                 query_system().unavailable_reason.c_str());
    return 1;
  }
  const ProblemList list = problems(command, options);
  Runtime runtime(runtime_options);
  if (options.emulate) std::printf("on the CPU emulator: times say nothing about a GPU\n");
  autotune::TuneOptions tune;
  tune.jobs = options.jobs;
  tune.timing.budget_ms = options.budget_ms;
  tune.only = options.only;
  tune.database = options.database;
  Progress progress;
  tune.progress = [&](const char* phase, int done, int total) { progress(phase, done, total); };
  int failed = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::printf("== [%zu/%zu] %s on %s\n", i + 1, list.size(), list[i]->describe().c_str(),
                runtime.device().name.c_str());
    std::fflush(stdout);
    try {
      const autotune::TuneReport report =
          autotune::tune(detail::tuning_of(runtime), *list[i], tune);
      print_report(report);
      failed += report.database.empty() ? 1 : 0;
    } catch (const Error& error) {
      std::fprintf(stderr, "flashjit: error: %s: %s\n", list[i]->describe().c_str(), error.what());
      ++failed;
    }
    std::fflush(stdout);
  }
  return failed == 0 ? 0 : 1;
}

int run_plan(const CLI::App& command, const AutotuneOptions& options) {
  if (options.arch.empty()) {
    throw InvalidArgument("--arch", "--plan needs the target, e.g. --arch sm_90a");
  }
  detail::validate_arch(options.arch);
  Progress progress;
  for (const std::shared_ptr<const autotune::TuningProblem>& problem : problems(command, options)) {
    std::printf("== plan: %s on %s\n", problem->describe().c_str(), options.arch.c_str());
    std::fflush(stdout);
    const std::vector<autotune::Candidate> candidates =
        autotune::plan(*problem, options.arch, options.jobs, options.only,
                       [&](int done, int total) { progress("compile", done, total); });
    int kept = 0;
    int unselected = 0;
    for (const autotune::Candidate& c : candidates) {
      if (c.pruned == autotune::kNotSelected) {  // --only's leftovers: counted, not listed
        ++unselected;
        continue;
      }
      int registers = 0;
      for (const detail::ResourceUsage& r : c.resources)
        registers = std::max(registers, r.registers);
      kept += c.pruned.empty() ? 1 : 0;
      std::printf("  %-30s %9s  regs %3d  %s%s\n", c.name.c_str(),
                  format_bytes(static_cast<std::uintmax_t>(c.shared_bytes)).c_str(), registers,
                  c.pruned.empty() ? "candidate" : ("pruned: " + c.pruned).c_str(),
                  c.is_default ? " (default)" : "");
    }
    for (const std::string& name : options.only) {
      const bool listed = std::any_of(candidates.begin(), candidates.end(),
                                      [&](const autotune::Candidate& c) { return c.name == name; });
      if (!listed) std::printf("  %-30s not a config of this problem (--only)\n", name.c_str());
    }
    std::printf("%d of %zu configs would be timed", kept, candidates.size());
    if (unselected > 0) std::printf(" (%d not selected by --only)", unselected);
    std::printf("\n");
    if (problem->pairs_parts()) {
      std::printf("then the fastest dK/dV tile with the fastest dQ tile, if not among them\n");
    }
  }
  return 0;
}

// --warm: compiles, concurrently, the kernels each problem's call launches under its default
// config (what a call runs until the shape is tuned) into the kernel cache, so a training job's
// first forward and backward find them there; nothing is timed, so --arch needs no GPU.
int run_warm(const CLI::App& command, const AutotuneOptions& options) {
  if (options.plan) throw InvalidArgument("--warm", "give --warm or --plan, not both");
  // What only tuning reads would be ignored here: refused by name instead.
  for (const char* timing : {"--only", "--budget-ms", "--db", "--emulate"}) {
    if (command.count(timing) > 0) {
      throw InvalidArgument(timing, std::string("is for tuning, which --warm does not do (it "
                                                "compiles the default configs, timing none)"));
    }
  }
  const std::string arch = target_arch(options.arch);
  std::vector<detail::KernelSpec> specs;
  std::set<std::string> listed;  // a kernel two problems share is compiled once
  for (const std::shared_ptr<const autotune::TuningProblem>& problem : problems(command, options)) {
    const autotune::TunedConfig config = problem->default_config(arch);
    std::printf("== warm: %s on %s: %s\n", problem->describe().c_str(), arch.c_str(),
                config.name().c_str());
    for (detail::KernelSpec& spec : problem->specs(config, arch)) {
      if (listed.insert(spec.display_name()).second) specs.push_back(std::move(spec));
    }
  }
  std::fflush(stdout);
  detail::order_longest_compiles_first(specs);
  return compile_into_cache(specs, arch, options.jobs) == 0 ? 0 : 1;
}

/// Prints one database; false (after saying why on stderr) when it cannot be read.
bool show_file(const std::filesystem::path& path) {
  // Whatever the file's meta says: show is for people, so a foreign file is shown too.
  const autotune::TuningDatabase db = autotune::TuningDatabase::load_any(path);
  if (!db.problem().empty()) {
    std::fflush(stdout);
    std::fprintf(stderr, "flashjit: error: %s\n", db.problem().c_str());
    return false;
  }
  std::printf("%s: %zu entries\n", path.c_str(), db.entries().size());
  for (const auto& [key, entry] : db.entries()) {
    std::printf("%s\n  winner %s, default %s\n", key.c_str(), entry.winner.c_str(),
                entry.default_config.c_str());
    for (const autotune::CandidateTiming& t : entry.candidates) {
      const std::string ms = std::isfinite(t.median_ms) ? std::to_string(t.median_ms) + " ms" : "-";
      std::printf("    %-30s %14s  %s\n", t.config.c_str(), ms.c_str(), t.status.c_str());
    }
  }
  return true;
}

// The given file, else every database in the cache's tuning folder.
int run_show(const std::string& database) {
  if (!database.empty()) {
    if (!std::filesystem::exists(database)) {
      throw InvalidArgument("--db", "'" + database + "' does not exist");
    }
    return show_file(database) ? 0 : 1;
  }
  const std::filesystem::path root = detail::DiskCache::default_root();
  const std::filesystem::path folder = autotune::tuning_folder(root);
  const std::vector<std::filesystem::path> files = autotune::database_files(root);
  if (files.empty()) {
    std::printf("%s: no tuning database yet (flashjit autotune fills it)\n", folder.c_str());
  }
  bool all_read = true;
  for (const std::filesystem::path& file : files) all_read = show_file(file) && all_read;
  return all_read ? 0 : 1;
}

}  // namespace

Subcommand add_autotune_command(CLI::App& app) {
  auto o = std::make_shared<AutotuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "autotune", "Time every candidate config per shape on the GPU and keep the fastest");
  cmd->add_option("--op", o->ops, "Ops to tune, of " + tuned_names())
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--head-dim", o->shape.head_dims, "Head dims (multiples of 8 up to 256)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seqlen", o->shape.seqlens,
                  "Sequence lengths (queries and keys; attention-decode: the context)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch-heads", o->shape.batch_heads, "batch x heads per shape")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--heads", o->shape.heads, "Heads per batch entry (batch = batch-heads / heads)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--heads-kv", o->shape.heads_kv, "Key/value heads (GQA, MQA; default: --heads)")
      ->check(CLI::PositiveNumber);
  for (const OpCommands& op : op_commands()) {
    if (op.add_autotune_options) op.add_autotune_options(*cmd);
  }
  const std::string fp32 = op_names(all_tunes(), [](const TuneOp& op) { return op.takes_fp32; });
  cmd->add_option("--dtype", o->dtypes, "bf16 and/or fp16 (" + fp32 + ": fp32 too)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--causal", o->causal, "true, false or both")->capture_default_str();
  cmd->add_option("-j,--jobs", o->jobs,
                  "Parallel compiles (default: one a hardware thread, as many as memory holds "
                  "at 1 GiB each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--budget-ms", o->budget_ms, "Timing budget per candidate (ms)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--only", o->only, "Only these configs (and the default), e.g. br128.bc64.w4.s2")
      ->delimiter(',');
  cmd->add_option("--db", o->database, "Database file (default: the GPU's, in the cache)");
  cmd->add_flag("--plan", o->plan,
                "List the candidates after static and resource pruning; no GPU needed");
  cmd->add_flag("--warm", o->warm,
                "Compile the kernels the shapes' calls launch (default configs) into the "
                "cache, concurrently; nothing is timed");
  cmd->add_option("--arch", o->arch, "Target for --plan or --warm, e.g. sm_90a");
  cmd->add_flag("--emulate", o->emulate,
                "Time on the CPU emulator (tests the tuner; its times mean nothing)");
  CLI::App* show = cmd->add_subcommand("show", "Print the tuning database");
  show->add_option("--db", o->database, "Database file (default: every one in the cache)");
  return {cmd, [o, cmd, show] {
            if (show->parsed()) return run_show(o->database);
            if (o->warm) return run_warm(*cmd, *o);
            return o->plan ? run_plan(*cmd, *o) : run_tune(*cmd, *o);
          }};
}

}  // namespace flashjit::tools
