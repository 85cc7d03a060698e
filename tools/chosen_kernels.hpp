#pragma once
// What the `run` and `bench` commands print as "kernel:": the kernels Runtime::forward or
// ::backward launches for a call, and where their config came from; and the config `run
// --config` names.
#include <optional>
#include <string>

#include "autotune/tuning_problem.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::tools {

/// The kernels of the config the runtime runs this call with (autotune::choose_config, which
/// forward() and backward() ask too and which memoizes its answer, so this is what they run):
/// their names, then "(heuristic default)" or "(tuned: from the tuning database)". Under the
/// automatic policy a shape missing from the database is tuned here. With `named`, that
/// config's kernels instead, then "(--config)".
std::string chosen_kernels(Runtime& runtime, const Attention& attention, DType dtype, bool backward,
                           const std::optional<autotune::TunedConfig>& named = std::nullopt);

/// The kernels of the config the runtime runs `problem` with (any tuned op, as above, without
/// `named`): their names, then where the config came from.
std::string chosen_kernels(Runtime& runtime, const autotune::TuningProblem& problem);

/// The config of `problem`'s space called `name`, as `flashjit autotune --plan` prints it
/// ("br64.bc32.w4.s1" forward, "br64.bc64.w4" backward). Throws InvalidArgument(`flag`) when
/// there is none, naming the shape and listing a few names there are.
autotune::TunedConfig named_config(const autotune::TuningProblem& problem, const std::string& name,
                                   const std::string& flag);

}  // namespace flashjit::tools
