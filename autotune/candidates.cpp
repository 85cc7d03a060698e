#include "autotune/candidates.hpp"

#include <algorithm>
#include <string>

#include "flashjit/error.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"
#include "runtime/template_sources.hpp"

namespace flashjit::autotune {
namespace {

std::string kib(int bytes) { return std::to_string((bytes + 1023) / 1024) + " KB"; }

}  // namespace

TuningKey tuning_key(const TuningProblem& problem) {
  // Any template change may move the optimum, so the whole set's digest is part of the key.
  return {std::string(problem.op()), detail::TemplateSet::active().digest().substr(0, 16),
          problem.key()};
}

Candidate make_candidate(const TuningProblem& problem, const TunedConfig& config,
                         const std::string& arch) {
  Candidate candidate;
  candidate.config = config;
  candidate.name = config.name();
  candidate.specs = problem.specs(config, arch);
  candidate.shared_bytes = config.shared_bytes();
  candidate.threads = config.threads(candidate.specs);
  return candidate;
}

std::vector<Candidate> enumerate_candidates(const TuningProblem& problem, const std::string& arch) {
  const TunedConfig fallback = problem.default_config(arch);
  std::vector<Candidate> candidates;
  for (const TunedConfig& config : problem.space()) {
    if (!problem.timed(config, fallback, arch)) continue;
    candidates.push_back(make_candidate(problem, config, arch));
    candidates.back().is_default = config == fallback;
  }
  // A default outside the space (attention-decode's split count that fills the device's SMs,
  // which the space's powers of two may miss) is timed anyway: every winner must beat it.
  if (std::none_of(candidates.begin(), candidates.end(),
                   [](const Candidate& c) { return c.is_default; })) {
    candidates.push_back(make_candidate(problem, fallback, arch));
    candidates.back().is_default = true;
  }
  return candidates;
}

void prune_static(std::vector<Candidate>& candidates, const TuningProblem& problem,
                  int shared_limit) {
  for (Candidate& c : candidates) {
    if (!c.pruned.empty()) continue;
    if (c.shared_bytes > shared_limit) {
      c.pruned = "shared memory " + kib(c.shared_bytes) + " > the device's " + kib(shared_limit);
    } else {
      c.pruned = problem.cannot_run(c.config);
    }
  }
  problem.prune_for_size(candidates);
}

void prune_on_resources(std::vector<Candidate>& candidates, const std::string& arch,
                        int shared_limit, int jobs, const std::function<void(int, int)>& progress) {
  // Flatten (candidate, spec) pairs of the candidates still in the running.
  struct Job {
    std::size_t candidate;
    std::size_t spec;
  };
  std::vector<Job> work;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    if (!candidates[c].pruned.empty()) continue;
    candidates[c].resources.assign(candidates[c].specs.size(), {});
    for (std::size_t s = 0; s < candidates[c].specs.size(); ++s) work.push_back({c, s});
  }
  detail::KernelCache& cache = detail::KernelCache::process_cache();
  const int total = static_cast<int>(work.size());
  int done = 0;
  detail::run_ordered<detail::CacheLookup>(
      total, jobs,
      [&](int i) {
        const Job& job = work[static_cast<std::size_t>(i)];
        return cache.get(candidates[job.candidate].specs[job.spec]);
      },
      [&](int i, detail::Outcome<detail::CacheLookup>& outcome) {
        const Job& job = work[static_cast<std::size_t>(i)];
        Candidate& c = candidates[job.candidate];
        const detail::KernelSpec& spec = c.specs[job.spec];
        if (progress) progress(++done, total);
        if (!c.pruned.empty()) return;
        if (outcome.error) {
          try {
            std::rethrow_exception(outcome.error);
          } catch (const std::exception& error) {
            const std::string message = error.what();
            c.pruned =
                "compile failed (" + spec.role + "): " + message.substr(0, message.find('\n'));
          }
          return;
        }
        const detail::ResourceUsage& r = outcome.value.entry->kernel.resources;
        c.resources[job.spec] = r;
        c.pruned = resource_problem(spec, r, shared_limit, arch);
      });
}

std::string resource_problem(const detail::KernelSpec& spec, const detail::ResourceUsage& r,
                             int shared_limit, const std::string& arch) {
  // Each kernel as it is launched (the delta pre-pass has its own block shape).
  const int shared = spec.dynamic_shared_bytes + r.static_shared_bytes;
  if (r.spill_bytes() > 0) {
    return "spills " + std::to_string(r.spill_bytes()) + " B in " + spec.role;
  }
  if (!r.advisories.empty()) return "ptxas advisory in " + spec.role + ": " + r.advisories.front();
  if (detail::blocks_per_sm(r.registers, spec.threads, shared, shared_limit, arch) == 0) {
    return "zero occupancy in " + spec.role + " (" + std::to_string(r.registers) + " registers x " +
           std::to_string(spec.threads) + " threads, " + kib(shared) + " shared)";
  }
  return "";
}

}  // namespace flashjit::autotune
