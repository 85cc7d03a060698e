#pragma once
// The one list of flashjit's ops: each op's name (as `flashjit compile` and `run` take it), what
// it computes, its compile matrix, the names its calls are tuned under (`flashjit autotune
// --op`, the tuning database's keys) and its build-time emulated instances. Each op writes its
// entry in its own folder (ops/<op>/<op>_op.cpp) and names it in its CMakeLists.txt
// (flashjit_op_entries); the build generates the list, so adding an op changes nothing here.
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

/// Every op, in the order ops/CMakeLists.txt adds their folders (defined in the generated
/// op_list.cpp from each folder's flashjit_op_entries line).
const std::vector<OpInfo>& ops();

/// The op called `name`; throws InvalidArgument("op") listing the known names otherwise.
const OpInfo& find_op(const std::string& name);

/// Every tuned op's name, in the registry's order.
std::vector<std::string> tuned_op_names();

}  // namespace flashjit::kernels
