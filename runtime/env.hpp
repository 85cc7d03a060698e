#pragma once
// Every environment variable flashjit reads, in one registry. Variables that change the code
// NVRTC generates are marked; their values are part of every kernel's cache key, and no other
// variable is (a variable that changes nothing must not split the cache).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashjit::detail {

/// One environment variable flashjit understands.
struct EnvVar {
  std::string_view name;
  std::string_view meaning;
  bool affects_codegen;
};

/// The registry, in a fixed order.
const std::vector<EnvVar>& env_registry();

/// The variable's value, or nullopt when unset. `name` must be in the registry.
std::optional<std::string> env_value(std::string_view name);

/// True when the variable is set to anything but "", "0", "false", "off" or "no".
bool env_flag(std::string_view name);

/// "NAME=value" for every codegen-affecting variable, unset ones as "NAME" (so that unset
/// and empty differ), in registry order: the environment's part of a cache key.
std::vector<std::string> codegen_environment();

}  // namespace flashjit::detail
