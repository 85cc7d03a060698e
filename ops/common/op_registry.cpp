#include "common/op_registry.hpp"

#include <algorithm>

#include "flashjit/error.hpp"

namespace flashjit::kernels {

const OpInfo& find_op(const std::string& name) {
  const auto& registry = ops();
  auto it = std::find_if(registry.begin(), registry.end(),
                         [&](const OpInfo& op) { return op.name == name; });
  if (it != registry.end()) return *it;
  std::string known;
  for (const OpInfo& op : registry) known += (known.empty() ? "" : ", ") + op.name;
  throw InvalidArgument("op", "unknown op '" + name + "'; known ops: " + known);
}

std::vector<std::string> tuned_op_names() {
  std::vector<std::string> names;
  for (const OpInfo& op : ops()) names.insert(names.end(), op.tuned.begin(), op.tuned.end());
  return names;
}

}  // namespace flashjit::kernels
