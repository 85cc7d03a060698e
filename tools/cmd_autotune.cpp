// `flashjit autotune`: fills the tuning database ahead of time (DESIGN.md section 6), lists the
// candidates without a GPU (--plan), and prints the database (show).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/attention_tuning.hpp"
#include "attention/decode_tuning.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_state.hpp"
#include "commands.hpp"
#include "common/op_registry.hpp"
#include "flashjit/error.hpp"
#include "format.hpp"
#include "layer_norm/layer_norm_space.cuh"
#include "layer_norm/layer_norm_tuning.hpp"
#include "multiscale/multiscale_tuning.hpp"
#include "runtime/disk_cache.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::tools {
namespace {

struct AutotuneOptions {
  std::vector<std::string> ops = {"attention-forward"};
  std::vector<int> head_dims = {128};
  std::vector<std::int64_t> seqlens = {4096};
  std::vector<std::int64_t> batch_heads = {32};
  std::int64_t heads = 16;
  std::int64_t heads_kv = 0;  // 0: --heads
  // attention-decode's shapes: batch, query tokens per sequence, keys per page (0: a dense
  // cache); --seqlen is the context.
  std::vector<std::int64_t> batches = {8};
  std::vector<std::int64_t> queries = {1};
  std::int64_t page_size = 16;
  std::vector<std::string> dtypes = {"bf16"};
  std::string causal = "false";
  int jobs = detail::default_workers();
  double budget_ms = 250;
  bool plan = false;
  std::string arch;
  bool emulate = false;
  std::vector<std::string> only;
  std::string database;
  bool deterministic = false;
  // The layer norm ops' shapes: every rows x cols, RMS norm or not, and the fused adds
  // (layer-norm-backward: --bias tunes the backward that writes dbias).
  std::vector<std::int64_t> rows = {8192};
  std::vector<int> cols = {1024};
  bool rms = false;
  bool bias = false;
  bool residual = false;
  std::string mask = "decay";  // the multi-scale ops' mask: decay or tensor
};

using ProblemList = std::vector<std::shared_ptr<const autotune::TuningProblem>>;

// The library's checks of an attention shape, reported against the flag that set the field,
// before anything is printed or compiled.
void check_attention(const Attention& attention) {
  validate_attention_flags(attention, {{"attention.batch", "--batch-heads"},
                                       {"attention.heads_q", "--heads"},
                                       {"attention.heads_kv", "--heads-kv"},
                                       {"attention.seqlen_q", "--seqlen"},
                                       {"attention.seqlen_k", "--seqlen"},
                                       {"attention.head_dim", "--head-dim"}});
  if (attention.batch < 1) throw InvalidArgument("--batch-heads", "must be at least 1 to be timed");
  if (attention.seqlen_q < 1) {
    throw InvalidArgument("--seqlen", "must be at least 1 to be timed");
  }
}

// attention-decode's problems at one (dtype, head dim, mask): every batch, query count and
// context, on the paged cache --page-size names (or a dense one with per-sequence lengths).
void add_decode_problems(const AutotuneOptions& o, DType dtype, int head_dim, bool causal,
                         ProblemList& list) {
  for (std::int64_t queries : o.queries) {
    for (std::int64_t context : o.seqlens) {
      for (std::int64_t batch : o.batches) {
        Attention a;
        a.batch = batch;
        a.heads_q = o.heads;
        a.heads_kv = o.heads_kv > 0 ? o.heads_kv : o.heads;
        a.seqlen_q = queries;
        a.seqlen_k = context;
        a.head_dim = head_dim;
        a.causal = causal;
        validate_attention_flags(a, {{"attention.batch", "--batch"},
                                     {"attention.heads_q", "--heads"},
                                     {"attention.heads_kv", "--heads-kv"},
                                     {"attention.seqlen_q", "--queries"},
                                     {"attention.seqlen_k", "--seqlen"},
                                     {"attention.head_dim", "--head-dim"}});
        if (batch < 1) throw InvalidArgument("--batch", "must be at least 1 to be timed");
        if (queries < 1 || queries > kernels::kMaxDecodeQueries) {
          throw InvalidArgument("--queries", "is " + std::to_string(queries) +
                                                 "; a decoding call has 1 to " +
                                                 std::to_string(kernels::kMaxDecodeQueries));
        }
        if (context < 1) throw InvalidArgument("--seqlen", "must be at least 1 to be timed");
        list.push_back(std::make_shared<kernels::DecodeProblem>(
            dtype, a, kernels::CacheLayout{true, o.page_size}));
      }
    }
  }
}

// The layer norm problems of one op and dtype: every rows x cols.
void add_layer_norm_problems(const AutotuneOptions& o, bool backward, DType dtype,
                             ProblemList& list) {
  for (int cols : o.cols) {
    if (cols < 1 || cols > layer_norm_space::kMaxCols) {
      throw InvalidArgument("--cols", "is " + std::to_string(cols) + "; must be from 1 to " +
                                          std::to_string(layer_norm_space::kMaxCols));
    }
    for (std::int64_t rows : o.rows) {
      if (rows < 1) throw InvalidArgument("--rows", "must be at least 1 to be timed");
      list.push_back(std::make_shared<kernels::LayerNormProblem>(
          backward, dtype,
          kernels::LayerNormShape{rows, cols, o.rms, o.bias, o.residual && !backward}));
    }
  }
}

// `name` if it is a tunable op; else InvalidArgument("--op") listing them.
std::string tuned_op(const std::string& name) {
  std::string listed;
  for (const std::string& op : kernels::tuned_op_names()) {
    if (name == op) return name;
    listed += (listed.empty() ? "" : ", ") + op;
  }
  throw InvalidArgument("--op",
                        "'" + name + "' is not a tunable op; the autotuner tunes " + listed);
}

// The attention-shaped problems of `op` (attention-forward, attention-backward and the
// multi-scale ops) at one dtype, head dim and causal flag: every seqlen and batch·heads.
void add_attention_problems(const AutotuneOptions& o, const std::string& op, DType dtype,
                            int head_dim, bool causal, ProblemList& list) {
  for (std::int64_t seqlen : o.seqlens) {
    for (std::int64_t bh : o.batch_heads) {
      Attention a;
      // batch·heads splits into heads of --heads each when it divides, else one batch.
      const std::int64_t heads = bh % o.heads == 0 ? o.heads : bh;
      a.batch = bh / heads;
      a.heads_q = heads;
      a.heads_kv = o.heads_kv > 0 && heads == o.heads ? o.heads_kv : heads;
      a.seqlen_q = a.seqlen_k = seqlen;
      a.head_dim = head_dim;
      a.causal = causal;
      a.deterministic = o.deterministic && op == "attention-backward";
      check_attention(a);
      if (op.starts_with("multiscale-")) {
        const MultiScaleAttention m{
            a.batch,    a.heads_q,
            a.heads_kv, a.seqlen_q,
            a.seqlen_k, a.head_dim,
            0.0f,       o.mask == "tensor" ? MultiScaleMask::tensor : MultiScaleMask::decay};
        list.push_back(
            std::make_shared<kernels::MultiScaleProblem>(op == "multiscale-backward", dtype, m));
      } else {
        list.push_back(
            std::make_shared<kernels::AttentionProblem>(op == "attention-backward", dtype, a));
      }
    }
  }
}

// Every problem the options describe, in a fixed order.
ProblemList problems(const AutotuneOptions& o) {
  if (o.page_size < 0 || o.page_size % 16 != 0) {
    throw InvalidArgument("--page-size", "is " + std::to_string(o.page_size) +
                                             "; must be a multiple of 16, or 0 for a dense cache");
  }
  std::vector<bool> causal_values;
  if (o.causal == "both")
    causal_values = {false, true};
  else if (o.causal == "true")
    causal_values = {true};
  else if (o.causal == "false")
    causal_values = {false};
  else
    throw InvalidArgument("--causal", "'" + o.causal + "': use true, false or both");
  ProblemList list;
  for (const std::string& name : o.ops) {
    for (const std::string& dtype_flag : o.dtypes) {
      const std::string op = tuned_op(name);
      const DType dtype = parse_dtype(dtype_flag, "--dtype");
      if (op == "layer-norm" || op == "layer-norm-backward") {
        add_layer_norm_problems(o, op == "layer-norm-backward", dtype, list);
        continue;
      }
      if (op.starts_with("multiscale-") && o.causal != "false") {
        throw InvalidArgument("--causal",
                              "applies to the attention ops; the multi-scale ops' "
                              "decay mask is causal already (--mask)");
      }
      for (int head_dim : o.head_dims) {
        for (bool causal : causal_values) {
          if (op == "attention-decode") {
            add_decode_problems(o, dtype, head_dim, causal, list);
          } else {
            add_attention_problems(o, op, dtype, head_dim, causal, list);
          }
        }
      }
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

int run_tune(const AutotuneOptions& options) {
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
  const ProblemList list = problems(options);
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

int run_plan(const AutotuneOptions& options) {
  if (options.arch.empty()) {
    throw InvalidArgument("--arch", "--plan needs the target, e.g. --arch sm_90a");
  }
  detail::validate_arch(options.arch);
  Progress progress;
  for (const std::shared_ptr<const autotune::TuningProblem>& problem : problems(options)) {
    std::printf("== plan: %s on %s\n", problem->describe().c_str(), options.arch.c_str());
    std::fflush(stdout);
    const std::vector<autotune::Candidate> candidates =
        autotune::plan(*problem, options.arch, options.jobs,
                       [&](int done, int total) { progress("compile", done, total); });
    int kept = 0;
    for (const autotune::Candidate& c : candidates) {
      int registers = 0;
      for (const detail::ResourceUsage& r : c.resources)
        registers = std::max(registers, r.registers);
      kept += c.pruned.empty() ? 1 : 0;
      std::printf("  %-30s %9s  regs %3d  %s%s\n", c.name.c_str(),
                  format_bytes(static_cast<std::uintmax_t>(c.shared_bytes)).c_str(), registers,
                  c.pruned.empty() ? "candidate" : ("pruned: " + c.pruned).c_str(),
                  c.is_default ? " (default)" : "");
    }
    std::printf("%d of %zu configs would be timed\n", kept, candidates.size());
    if (problem->pairs_parts()) {
      std::printf("then the fastest dK/dV tile with the fastest dQ tile, if not among them\n");
    }
  }
  return 0;
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
  std::string tuned;
  for (const std::string& op : kernels::tuned_op_names()) {
    tuned += (tuned.empty() ? "" : ", ") + op;
  }
  cmd->add_option("--op", o->ops, "Ops to tune, of " + tuned)
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--head-dim", o->head_dims, "Head dims (multiples of 8 up to 256)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seqlen", o->seqlens,
                  "Sequence lengths (queries and keys; attention-decode: the context)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch-heads", o->batch_heads, "batch x heads per shape")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--heads", o->heads, "Heads per batch entry (batch = batch-heads / heads)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--heads-kv", o->heads_kv, "Key/value heads (GQA, MQA; default: --heads)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--batch", o->batches, "attention-decode: batch sizes")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--queries", o->queries, "attention-decode: query tokens per sequence (1-16)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--page-size", o->page_size,
                  "attention-decode: keys per page of the cache (0: a dense cache)")
      ->capture_default_str();
  cmd->add_option("--rows", o->rows, "layer-norm, layer-norm-backward: rows of x")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--cols", o->cols, "layer-norm, layer-norm-backward: columns of x (1-65536)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_flag("--rms", o->rms, "layer-norm, layer-norm-backward: RMS norm");
  cmd->add_option("--mask", o->mask,
                  "multiscale-forward, multiscale-backward: decay (per-head rates, generated in "
                  "the kernel) or tensor")
      ->check(CLI::IsMember({"decay", "tensor"}))
      ->capture_default_str();
  cmd->add_flag("--bias", o->bias,
                "layer-norm, layer-norm-backward: a fused bias add (the backward: writes dbias)");
  cmd->add_flag("--residual", o->residual, "layer-norm: a fused residual add");
  cmd->add_option("--dtype", o->dtypes,
                  "bf16 and/or fp16 (layer-norm, layer-norm-backward: fp32 too)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--causal", o->causal, "true, false or both")->capture_default_str();
  cmd->add_option("-j,--jobs", o->jobs, "Parallel compiles")->check(CLI::Range(1, 64));
  cmd->add_option("--budget-ms", o->budget_ms, "Timing budget per candidate (ms)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--only", o->only, "Only these configs (and the default), e.g. br128.bc64.w4.s2")
      ->delimiter(',');
  cmd->add_option("--db", o->database, "Database file (default: the GPU's, in the cache)");
  cmd->add_flag("--deterministic", o->deterministic,
                "Tune the backward's deterministic mode (its own dQ kernel's tiles too)");
  cmd->add_flag("--plan", o->plan,
                "List the candidates after static and resource pruning; no GPU needed");
  cmd->add_option("--arch", o->arch, "Target for --plan, e.g. sm_90a");
  cmd->add_flag("--emulate", o->emulate,
                "Time on the CPU emulator (tests the tuner; its times mean nothing)");
  CLI::App* show = cmd->add_subcommand("show", "Print the tuning database");
  show->add_option("--db", o->database, "Database file (default: every one in the cache)");
  return {cmd, [o, show] {
            if (show->parsed()) return run_show(o->database);
            return o->plan ? run_plan(*o) : run_tune(*o);
          }};
}

}  // namespace flashjit::tools
