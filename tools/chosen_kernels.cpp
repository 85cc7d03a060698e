#include "chosen_kernels.hpp"

#include "api/runtime_parts.hpp"
#include "autotune/candidates.hpp"
#include "autotune/tuning_state.hpp"

namespace flashjit::tools {

std::string chosen_kernels(Runtime& runtime, const Attention& attention, DType dtype,
                           bool backward) {
  const std::string arch = runtime.device().arch();
  const autotune::TuningProblem problem{
      backward ? autotune::TunedOp::attention_backward : autotune::TunedOp::attention_forward,
      dtype, attention};
  const autotune::TunedConfig chosen = autotune::choose_config(detail::tuning_of(runtime), problem);
  std::string names;
  for (const detail::KernelSpec& spec : autotune::config_specs(chosen, arch)) {
    names += (names.empty() ? "" : ", ") + spec.display_name();
  }
  const bool tuned = chosen != autotune::default_config(problem, arch);
  return names + (tuned ? " (tuned: from the tuning database)" : " (heuristic default)");
}

}  // namespace flashjit::tools
