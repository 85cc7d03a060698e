#pragma once
// What the `run` and `bench` commands print as "kernel:": the kernels an op's call launches
// (the config its tuning problem is given), and where their config came from; and the config
// `run --config` names.
#include <optional>
#include <string>

#include "autotune/tuning_problem.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::tools {

/// The kernels of the config the runtime runs `problem` with (autotune::choose_config, which
/// the op's calls ask too and which memoizes its answer, so this is what they run): their
/// names, then "(heuristic default)" or "(tuned: from the tuning database)". Under the automatic
/// policy a shape missing from the database is tuned here. With `named`, that config's kernels
/// instead, then "(--config)".
std::string chosen_kernels(Runtime& runtime, const autotune::TuningProblem& problem,
                           const std::optional<autotune::TunedConfig>& named = std::nullopt);

/// The config of `problem`'s space called `name`, as `flashjit autotune --plan` prints it
/// ("br64.bc32.w4.s1" forward, "br64.bc64.w4" backward). Throws InvalidArgument(`flag`) when
/// there is none, naming the shape and listing a few names there are.
autotune::TunedConfig named_config(const autotune::TuningProblem& problem, const std::string& name,
                                   const std::string& flag);

}  // namespace flashjit::tools
