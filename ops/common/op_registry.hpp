#pragma once
// The one list of flashjit's ops: each op's name (as `flashjit compile` and `run` take it), what
// it computes, its compile matrix, the names its calls are tuned under (`flashjit autotune
// --op`, the tuning database's keys) and its build-time emulated instances. Each op writes its
// entry in its own folder (ops/<op>/<op>_op.cpp); adding an op adds one declaration here and one
// line to ops().
#include <functional>
#include <string>
#include <vector>

#include "runtime/emulated_kernel_table.hpp"
#include "runtime/kernel_spec.hpp"

namespace flashjit::kernels {

/// Which specializations of an op to list.
enum class SpecSet {
  defaults,  ///< the heuristic config of every shape class (what a run without tuning uses)
  all,       ///< every valid config of the op's space
};

struct OpInfo {
  std::string name;
  std::string description;
  std::function<std::vector<detail::KernelSpec>(const std::string& arch, SpecSet set)> specs;
  /// The TuningProblem::op() names of the op's tuned calls; empty for an op with one config per
  /// shape class chosen by rule.
  std::vector<std::string> tuned;
  /// Adds the op's build-time emulated instances (its *_emulated.cpp) to the table the emulator
  /// backend runs without compiling; empty for an op the emulator compiles on first launch.
  std::function<void(detail::EmulatedKernelTable&)> add_emulated;
};

// Each op's entry, defined in its folder.
OpInfo softmax_op();
OpInfo merge_states_op();
OpInfo layer_norm_op();
OpInfo multiscale_op();
OpInfo attention_forward_op();
OpInfo attention_backward_op();

/// Every op, in a fixed order.
const std::vector<OpInfo>& ops();

/// The op called `name`; throws InvalidArgument("op") listing the known names otherwise.
const OpInfo& find_op(const std::string& name);

/// Every tuned op's name, in the registry's order.
std::vector<std::string> tuned_op_names();

}  // namespace flashjit::kernels
