#include "chosen_kernels.hpp"

#include "api/runtime_parts.hpp"
#include "autotune/tuning_state.hpp"
#include "flashjit/error.hpp"

namespace flashjit::tools {

namespace {

std::string kernels_of(Runtime& runtime, const autotune::TuningProblem& problem,
                       const std::optional<autotune::TunedConfig>& named) {
  const std::string arch = runtime.device().arch();
  const autotune::TunedConfig chosen =
      named ? *named : autotune::choose_config(detail::tuning_of(runtime), problem);
  std::string names;
  for (const detail::KernelSpec& spec : autotune::config_specs(chosen, arch)) {
    names += (names.empty() ? "" : ", ") + spec.display_name();
  }
  if (named) return names + " (--config)";
  const bool tuned = chosen != autotune::default_config(problem, arch);
  return names + (tuned ? " (tuned: from the tuning database)" : " (heuristic default)");
}

}  // namespace

std::string chosen_kernels(Runtime& runtime, const Attention& attention, DType dtype, bool backward,
                           const std::optional<autotune::TunedConfig>& named) {
  const autotune::TuningProblem problem = autotune::make_problem(
      backward ? autotune::TunedOp::attention_backward : autotune::TunedOp::attention_forward,
      dtype, attention);
  return kernels_of(runtime, problem, named);
}

std::string chosen_kernels(Runtime& runtime, const autotune::TuningProblem& problem) {
  return kernels_of(runtime, problem, std::nullopt);
}

autotune::TunedConfig named_config(const autotune::TuningProblem& problem, const std::string& name,
                                   const std::string& flag) {
  const std::vector<autotune::TunedConfig> space = autotune::space_configs(problem);
  for (const autotune::TunedConfig& config : space) {
    if (autotune::config_name(config) == name) return config;
  }
  constexpr std::size_t kListed = 8;
  std::string listed;
  for (std::size_t i = 0; i < space.size() && i < kListed; ++i) {
    listed += (i == 0 ? "" : ", ") + autotune::config_name(space[i]);
  }
  const Attention& a = problem.attention;
  throw InvalidArgument(
      flag, "'" + name + "' is not a config of the " + autotune::tuned_op_name(problem.op) +
                " space for head dim " + std::to_string(a.head_dim) + " (" +
                std::string(dtype_name(problem.dtype)) + (a.causal ? ", causal" : "") +
                "); it has " + std::to_string(space.size()) + ", such as " + listed +
                " (`flashjit autotune --plan --arch sm_80` with the same --op and --head-dim "
                "lists them all)");
}

}  // namespace flashjit::tools
