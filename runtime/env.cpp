#include "env.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace flashjit::detail {

const std::vector<EnvVar>& env_registry() {
  static const std::vector<EnvVar> registry = {
      {"FLASHJIT_CACHE_DIR", "kernel cache directory (default $XDG_CACHE_HOME/flashjit)", false},
      {"FLASHJIT_ALWAYS_COMPILE", "compile every kernel, bypassing the disk cache", false},
      {"FLASHJIT_NO_JIT", "a kernel missing from the cache is an error, not a compile", false},
      {"FLASHJIT_TEMPLATE_DIR", "read kernel templates from this folder, not the embedded copy",
       false},  // the template bytes themselves are in the key
      {"FLASHJIT_LINEINFO", "compile kernels with -lineinfo (source lines in sanitizers)", true},
      {"FLASHJIT_TUNING", "how kernels are chosen: off, cached (the default) or auto", false},
      // The emulator's host compiles: the compiler's identity and the archive's bytes are in
      // the host kernels' keys, so the variables themselves are not.
      {"FLASHJIT_HOST_CXX", "the C++ compiler that builds kernels for the emulator", false},
      {"FLASHJIT_EMULATOR_LIBRARY", "the emulator's archive linked into those kernels", false},
      // Read by the emulator itself at each launch; it changes the order of events, not code.
      {"FLASHJIT_EMULATOR_EXPLORE",
       "explore other legal orderings on the emulator from this seed (TMA copies landing early, "
       "try_wait failing)",
       false},
  };
  return registry;
}

std::optional<std::string> env_value(std::string_view name) {
  const auto& registry = env_registry();
  if (std::none_of(registry.begin(), registry.end(),
                   [&](const EnvVar& var) { return var.name == name; })) {
    throw std::logic_error("environment variable not in the registry: " + std::string(name));
  }
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

bool env_flag(std::string_view name) {
  std::optional<std::string> value = env_value(name);
  if (!value) return false;
  std::string lower = *value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return !(lower.empty() || lower == "0" || lower == "false" || lower == "off" || lower == "no");
}

std::vector<std::string> codegen_environment() {
  std::vector<std::string> entries;
  for (const EnvVar& var : env_registry()) {
    if (!var.affects_codegen) continue;
    std::optional<std::string> value = env_value(var.name);
    entries.push_back(std::string(var.name) + (value ? "=" + *value : ""));
  }
  return entries;
}

}  // namespace flashjit::detail
