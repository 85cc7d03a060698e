#pragma once
// Tuning one shape end to end (docs/autotuning.md): candidates, static pruning, parallel
// compiles through the kernel cache with pruning on the resource report, then each survivor
// checked against the default's output and timed, and the result merged into the database.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autotune/candidates.hpp"
#include "autotune/timer.hpp"
#include "autotune/tuning_db.hpp"
#include "autotune/tuning_state.hpp"

namespace flashjit::autotune {

/// How to tune.
struct TuneOptions {
  TimingOptions timing;
  int jobs = 0;  ///< parallel compiles; 0 picks detail::default_workers()
  /// Only these config names (empty: the whole space). The default is always kept.
  std::vector<std::string> only;
  /// Called on the tuning thread as work advances: phase ("compile" or "time"), done, total.
  std::function<void(const char* phase, int done, int total)> progress;
  /// The database to merge the result into; empty: the runtime's (see TuningState).
  std::filesystem::path database;
  bool persist = true;  ///< false: measure and report; write nothing, change no later choice
};

/// What tuning one shape found.
struct TuneReport {
  TuningKey key;
  double flops = 0;                      ///< problem.flops()
  double bytes = 0;                      ///< problem.bytes()
  std::vector<Candidate> candidates;     ///< every candidate, the pruned ones with a reason
  std::vector<CandidateTiming> timings;  ///< this run's measurements, in candidate order
  TuningEntry entry;               ///< the entry as stored (merged with what the file held before)
  std::filesystem::path database;  ///< where it was written; empty when nothing was
  std::string persist_problem;     ///< why it was not written, when persisting failed
};

/// Tunes `problem` on the device of `state`'s backend, for `state` (whose database the result
/// is merged into, and whose later choices see it): random inputs in its memory, the default config
/// run first as the reference, every candidate that survives pruning checked against it (relative
/// L2 error within 4 units of the dtype's rounding; otherwise it scores infinity with the error
/// in its status) and timed with time_launches. A candidate that fails to launch scores
/// infinity too. Then the op's fastest pair of parts, if it has one (TuningProblem::fastest_pair),
/// is checked and timed as one more candidate. Throws only for a problem that cannot be tuned
/// (InvalidArgument for a bad shape, Error when not even the default runs).
TuneReport tune(TuningState& state, const TuningProblem& problem, const TuneOptions& options = {});

/// The pruning reason of a config that TuneOptions::only (`--only`) leaves out.
inline constexpr const char* kNotSelected = "not selected";

/// The candidates for `problem` on `arch` after static and resource pruning, without a GPU
/// (`flashjit autotune --plan`): compiles through the kernel cache like tune(). With `only`
/// non-empty, the configs it does not name (but the default) are pruned as "not selected" and
/// not compiled, as in TuneOptions::only.
std::vector<Candidate> plan(const TuningProblem& problem, const std::string& arch, int jobs = 0,
                            const std::vector<std::string>& only = {},
                            const std::function<void(int, int)>& progress = {});

/// How tune() judges a candidate's output against the default's: "" when the relative L2
/// error is within 4 units of `dtype`'s rounding (two correct kernels differ only in their fp32
/// summation order), else the status a wrong kernel is reported with ("wrong result: relative
/// L2 error 0.53 against the default's output"). A non-finite value is always wrong.
std::string compare_outputs(const std::vector<float>& output, const std::vector<float>& reference,
                            DType dtype);

/// How many times tune() has timed candidates in this process (tests check that a shape found
/// in the database is not tuned again).
int tunings_in_process();

}  // namespace flashjit::autotune
