#include "autotune/tuner.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autotune/tuning_state.hpp"
#include "autotune/workspace.hpp"
#include "flashjit/error.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::autotune {
namespace {

std::atomic<int> tunings{0};

// ‖x − reference‖₂ / ‖reference‖₂, infinite when x has a non-finite value.
double relative_l2(const std::vector<float>& x, const std::vector<float>& reference) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(x[i]) - reference[i];
    diff += d * d;
    norm += static_cast<double>(reference[i]) * reference[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// Two correct kernels differ by their fp32 summation order, which the 16-bit outputs round
// away to within a few units; a wrong kernel is off by O(1).
double error_bound(DType dtype) { return 4.0 * (dtype == DType::f16 ? 0x1p-11 : 0x1p-8); }

// A status fits a table row: the error's first sentence, at most 160 characters.
std::string short_reason(const std::exception& error) {
  std::string message = error.what();
  message = message.substr(0, message.find('\n'));
  constexpr std::size_t kMax = 160;
  if (message.size() > kMax) message = message.substr(0, kMax - 3) + "...";
  return message;
}

// The candidates to time: the default first (the reference every other output is checked
// against), then the others in the space's order.
std::vector<std::size_t> timing_order(const std::vector<Candidate>& candidates) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].pruned.empty() && candidates[i].is_default) order.push_back(i);
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].pruned.empty() && !candidates[i].is_default) order.push_back(i);
  }
  return order;
}

void keep_only(std::vector<Candidate>& candidates, const std::vector<std::string>& only) {
  if (only.empty()) return;
  for (Candidate& c : candidates) {
    if (c.is_default) continue;
    if (std::find(only.begin(), only.end(), c.name) == only.end()) c.pruned = kNotSelected;
  }
}

std::vector<Candidate> pruned_candidates(const TuningProblem& problem, const std::string& arch,
                                         int shared_limit, int jobs,
                                         const std::vector<std::string>& only,
                                         const std::function<void(int, int)>& progress) {
  std::vector<Candidate> candidates = enumerate_candidates(problem, arch);
  keep_only(candidates, only);
  prune_static(candidates, problem, shared_limit);
  prune_on_resources(candidates, arch, shared_limit, jobs > 0 ? jobs : detail::default_workers(),
                     progress);
  return candidates;
}

// Runs each candidate once on the problem's random inputs, checks its output against the first
// one run (the default's), then times it.
class CandidateTimer {
 public:
  CandidateTimer(detail::RuntimeBackend& backend, const TuningProblem& problem,
                 const TuneOptions& options)
      : backend_(backend),
        problem_(problem),
        options_(options),
        workspace_(problem.workspace(backend)) {}

  CandidateTiming time(const Candidate& c) {
    CandidateTiming timing;
    timing.config = c.name;
    try {
      workspace_->run(c.config, nullptr);
      backend_.synchronize(nullptr);
      std::vector<float> out = workspace_->outputs();
      if (reference_.empty()) {
        reference_ = std::move(out);
      } else if (std::string wrong = compare_outputs(out, reference_, problem_.dtype);
                 !wrong.empty()) {
        timing.status = std::move(wrong);
      }
      if (timing.status == "ok") {
        timing.median_ms = time_launches(
                               backend_, [&](Stream stream) { workspace_->run(c.config, stream); },
                               options_.timing)
                               .median_ms;
      }
    } catch (const std::exception& error) {
      timing.status = "failed: " + short_reason(error);
      timing.median_ms = std::numeric_limits<double>::infinity();
      if (reference_.empty() && c.is_default) throw;  // nothing to tune against
    }
    return timing;
  }

 private:
  detail::RuntimeBackend& backend_;
  const TuningProblem& problem_;
  const TuneOptions& options_;
  std::unique_ptr<TuningWorkspace> workspace_;
  std::vector<float> reference_;
};

// Checks and times each surviving candidate into report.timings.
void time_candidates(CandidateTimer& timer, TuneReport& report, const TuneOptions& options) {
  const std::vector<std::size_t> order = timing_order(report.candidates);
  int done = 0;
  for (std::size_t index : order) {
    report.timings.push_back(timer.time(report.candidates[index]));
    if (options.progress) options.progress("time", ++done, static_cast<int>(order.size()));
  }
}

// Adds the op's fastest pair of parts (the deterministic backward's tiles) as one more
// candidate, checked and timed like the others (its kernels are in the cache already: each ran
// in a measured config).
void time_fastest_pair(CandidateTimer& timer, const TuningProblem& problem, TuneReport& report,
                       const std::string& arch, int shared_limit, const TuneOptions& options) {
  const std::optional<TunedConfig> pair = problem.fastest_pair(report.candidates, report.timings);
  if (!pair) return;
  std::vector<Candidate> extra = {make_candidate(problem, *pair, arch)};
  prune_on_resources(extra, arch, shared_limit, 1);
  if (extra.front().pruned.empty()) report.timings.push_back(timer.time(extra.front()));
  report.candidates.push_back(std::move(extra.front()));
  if (options.progress) options.progress("pair", 1, 1);
}

void persist(TuningState& state, TuneReport& report, const TuneOptions& options) {
  const std::filesystem::path path = options.database.empty() ? state.database() : options.database;
  if (!options.persist) return;  // a measurement only: the runtime's choices stay as they were
  try {
    report.entry = merge_into_file(path, state.meta(), report.key, report.entry);
    report.database = path;
  } catch (const Error& error) {
    report.persist_problem = error.what();
  }
  state.remember(report.key, report.entry);
}

}  // namespace

TuneReport tune(TuningState& state, const TuningProblem& problem, const TuneOptions& options) {
  const DeviceInfo& device = state.backend().info();
  const std::string arch = device.arch();
  const int shared_limit = static_cast<int>(device.shared_memory_optin);
  TuneReport report;
  report.key = tuning_key(problem);
  report.flops = problem.flops();
  report.bytes = problem.bytes();
  std::function<void(int, int)> compile_progress;
  if (options.progress) {
    compile_progress = [&](int done, int total) { options.progress("compile", done, total); };
  }
  report.candidates =
      pruned_candidates(problem, arch, shared_limit, options.jobs, options.only, compile_progress);
  ++tunings;
  CandidateTimer timer(state.backend(), problem, options);
  time_candidates(timer, report, options);
  time_fastest_pair(timer, problem, report, arch, shared_limit, options);
  std::sort(report.timings.begin(), report.timings.end(),
            [](const auto& a, const auto& b) { return a.config < b.config; });
  std::string default_name;
  for (const Candidate& c : report.candidates) {
    if (c.is_default) default_name = c.name;
  }
  report.entry.default_config = default_name;
  report.entry.candidates = report.timings;
  report.entry.winner = pick_winner(default_name, report.timings);
  persist(state, report, options);
  return report;
}

std::vector<Candidate> plan(const TuningProblem& problem, const std::string& arch, int jobs,
                            const std::vector<std::string>& only,
                            const std::function<void(int, int)>& progress) {
  return pruned_candidates(problem, arch, detail::arch_shared_memory_limit(arch), jobs, only,
                           progress);
}

std::string compare_outputs(const std::vector<float>& output, const std::vector<float>& reference,
                            DType dtype) {
  const double error = output.size() == reference.size() ? relative_l2(output, reference)
                                                         : std::numeric_limits<double>::infinity();
  if (error <= error_bound(dtype)) return "";
  return "wrong result: relative L2 error " + std::to_string(error) +
         " against the default's output";
}

int tunings_in_process() { return tunings.load(); }

}  // namespace flashjit::autotune
