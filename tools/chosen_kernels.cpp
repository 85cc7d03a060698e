#include "chosen_kernels.hpp"

#include "api/runtime_parts.hpp"
#include "autotune/tuning_state.hpp"
#include "flashjit/error.hpp"

namespace flashjit::tools {

std::string chosen_kernels(Runtime& runtime, const autotune::TuningProblem& problem,
                           const std::optional<autotune::TunedConfig>& named) {
  const std::string arch = runtime.device().arch();
  const autotune::TunedConfig chosen =
      named ? *named : autotune::choose_config(detail::tuning_of(runtime), problem);
  std::string names;
  for (const detail::KernelSpec& spec : problem.specs(chosen, arch)) {
    names += (names.empty() ? "" : ", ") + spec.display_name();
  }
  if (named) return names + " (--config)";
  const bool tuned = chosen != problem.default_config(arch);
  return names + (tuned ? " (tuned: from the tuning database)" : " (heuristic default)");
}

autotune::TunedConfig named_config(const autotune::TuningProblem& problem, const std::string& name,
                                   const std::string& flag) {
  const std::vector<autotune::TunedConfig> space = problem.space();
  for (const autotune::TunedConfig& config : space) {
    if (config.name() == name) return config;
  }
  constexpr std::size_t kListed = 8;
  std::string listed;
  for (std::size_t i = 0; i < space.size() && i < kListed; ++i) {
    listed += (i == 0 ? "" : ", ") + space[i].name();
  }
  throw InvalidArgument(flag, "'" + name + "' is not a config of the space of " +
                                  problem.describe() + "; it has " + std::to_string(space.size()) +
                                  ", such as " + listed +
                                  " (`flashjit autotune --plan --arch sm_80` with the same --op "
                                  "and shape lists them all)");
}

}  // namespace flashjit::tools
