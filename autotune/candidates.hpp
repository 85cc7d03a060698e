#pragma once
// The candidates the autotuner considers for one call shape, and why some are dropped before
// any timing (docs/autotuning.md). The configs come from the op's description of the shape
// (TuningProblem: its space, declared beside the op's template with the validity predicate the
// template asserts); pruning is static first (shared memory, what the op says cannot run or is
// larger than the shape), then on the compiler's resource report (spills, advisories, zero
// occupancy).
#include <functional>
#include <string>
#include <vector>

#include "autotune/tuning_db.hpp"
#include "autotune/tuning_problem.hpp"
#include "runtime/compiler.hpp"
#include "runtime/kernel_spec.hpp"

namespace flashjit::autotune {

/// The database key of `problem`: its op, the active templates' digest (any template change may
/// move the optimum) and its key().
TuningKey tuning_key(const TuningProblem& problem);

/// The candidate of `config` on `arch` for `problem`, its kernels (problem.specs) listed and
/// not yet compiled.
Candidate make_candidate(const TuningProblem& problem, const TunedConfig& config,
                         const std::string& arch);

/// The configs of the problem's space the tuner times on `arch` (TuningProblem::timed), in the
/// space's fixed order, with the heuristic default marked; the default is added when the space
/// lacks it (attention-decode's split count that fills the device), as every winner must beat
/// it.
std::vector<Candidate> enumerate_candidates(const TuningProblem& problem, const std::string& arch);

/// Static pruning, before any compile: shared memory over `shared_limit` (the device's opt-in
/// limit, or the arch's with --plan), configs that cannot_run the problem, and what the op
/// prunes as larger than the shape (TuningProblem::prune_for_size). The default is never
/// pruned for size: it is the baseline every winner must beat.
void prune_static(std::vector<Candidate>& candidates, const TuningProblem& problem,
                  int shared_limit);

/// Compiles every spec of the candidates still in the running through the kernel cache on
/// `jobs` workers (a spec compiled before is a cache hit), records the resource reports and
/// prunes those that spill, carry a ptxas performance advisory (ResourceUsage::advisories: a
/// serialized wgmma pipeline, say, which no timing should have to discover), cannot be resident
/// (zero occupancy), or fail to compile.
/// `progress(done, total)` is called on the calling thread after each spec.
void prune_on_resources(std::vector<Candidate>& candidates, const std::string& arch,
                        int shared_limit, int jobs,
                        const std::function<void(int, int)>& progress = {});

/// Why prune_on_resources drops a candidate with kernel `spec` that compiled to `resources`
/// ("spills 48 B in dq", "ptxas advisory in forward: C7514: ...", "zero occupancy in ..."), or
/// "" when that kernel may be timed.
std::string resource_problem(const detail::KernelSpec& spec, const detail::ResourceUsage& resources,
                             int shared_limit, const std::string& arch);

}  // namespace flashjit::autotune
