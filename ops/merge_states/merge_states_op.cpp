// merge_states' entry in the op registry: its name and its compile matrix.
#include "common/op_registry.hpp"
#include "merge_states/merge_states.hpp"
#include "merge_states/merge_states_emulated.hpp"
#include "merge_states/merge_states_space.cuh"

namespace flashjit::kernels {
namespace {

// The merge's compile matrix: every config, or the default of every (form, dtype pair, head
// dim), each once (head dims share defaults by the width the threads cover).
std::vector<detail::KernelSpec> merge_states_specs(const std::string& arch, SpecSet set) {
  std::vector<MergeStatesConfig> configs;
  for (const MergeStatesConfig& config : merge_states_configs()) {
    if (set == SpecSet::all) {
      configs.push_back(config);
      continue;
    }
    for (int head_dim = 1; head_dim <= merge_states_space::kMaxHeadDim; ++head_dim) {
      const MergeStatesConfig chosen =
          default_merge_states_config(config.input, config.output, head_dim, config.in_place);
      if (chosen == config) {
        configs.push_back(config);
        break;
      }
    }
  }
  std::vector<detail::KernelSpec> specs;
  for (const MergeStatesConfig& config : configs) specs.push_back(merge_states_spec(config, arch));
  return specs;
}

}  // namespace

OpInfo merge_states_op() {
  return {"merge-states",
          "exact merge of partial attention states (O, natural-log LSE) over disjoint key sets, "
          "N-way and two-way in place; partials fp16/bf16/fp32",
          merge_states_specs,
          {},
          emulated::add_merge_states_kernels};
}

}  // namespace flashjit::kernels
