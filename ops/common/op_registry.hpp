#pragma once
// The ops flashjit can compile, by name, for `flashjit compile` and cache warm-up.
#include <functional>
#include <string>
#include <vector>

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
};

/// Every op, in a fixed order.
const std::vector<OpInfo>& ops();

/// The op called `name`; throws InvalidArgument("op") listing the known names otherwise.
const OpInfo& find_op(const std::string& name);

}  // namespace flashjit::kernels
