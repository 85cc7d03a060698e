#pragma once
// What the `run` and `bench` commands print as "kernel:": the kernels Runtime::forward or
// ::backward launches for a call, and where their config came from.
#include <string>

#include "flashjit/attention.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::tools {

/// The kernels of the config the runtime runs this call with (autotune::choose_config, which
/// forward() and backward() ask too and which memoizes its answer, so this is what they run):
/// their names, then "(heuristic default)" or "(tuned: from the tuning database)". Under the
/// automatic policy a shape missing from the database is tuned here.
std::string chosen_kernels(Runtime& runtime, const Attention& attention, DType dtype,
                           bool backward);

}  // namespace flashjit::tools
