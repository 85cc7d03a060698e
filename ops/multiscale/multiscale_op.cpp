// Multi-scale attention's entry in the op registry: its name, its compile matrix and its tuned
// ops.
#include <string>
#include <unordered_set>

#include "common/op_registry.hpp"
#include "multiscale/multiscale_attention.hpp"

namespace flashjit::kernels {
namespace {

// Multi-scale attention's compile matrix: its forward and backward kernels (the attention
// tiles with multi-scale attention's step) for both masks: the defaults at head dims 64, 128 and
// 256 in bf16 and at 128 in fp16; with `all`, every config at 64 and 128 in bf16.
std::vector<detail::KernelSpec> multiscale_specs(const std::string& arch, SpecSet set) {
  struct Row {
    DType dtype;
    int head_dim;
  };
  constexpr Row kRows[] = {
      {DType::bf16, 64}, {DType::bf16, 128}, {DType::bf16, 256}, {DType::f16, 128}};
  std::vector<detail::KernelSpec> specs;
  std::unordered_set<std::string> listed;
  const auto add = [&](const detail::KernelSpec& spec) {
    if (listed.insert(spec.readable_name).second) specs.push_back(spec);
  };
  for (MultiScaleMask mask : {MultiScaleMask::decay, MultiScaleMask::tensor}) {
    for (const Row& row : kRows) {
      std::vector<ForwardConfig> forward = {
          default_multiscale_forward_config(row.dtype, row.head_dim, arch)};
      std::vector<BackwardConfig> backward = {
          default_multiscale_backward_config(row.dtype, row.head_dim, arch)};
      if (set == SpecSet::all && row.dtype == DType::bf16 && row.head_dim <= 128) {
        forward = multiscale_forward_configs(row.dtype, row.head_dim);
        backward = multiscale_backward_configs(row.dtype, row.head_dim);
      }
      for (const ForwardConfig& config : forward) add(multiscale_forward_spec(config, mask, arch));
      for (const BackwardConfig& config : backward) {
        for (const detail::KernelSpec& spec : multiscale_backward_specs(config, mask, arch)) {
          add(spec);
        }
      }
    }
  }
  return specs;
}

}  // namespace

OpInfo multiscale_op() {
  return {"multiscale",
          "multi-scale attention (retention): O = (S V) / max(rowsum(|S|), 1), S = scale·QKᵀ ∘ M "
          "with a per-head decay or a mask tensor; forward and deterministic backward, fp16/bf16",
          multiscale_specs,
          {"multiscale-forward", "multiscale-backward"},
          {}};  // no build-time instances: the emulator compiles them on first launch
}

}  // namespace flashjit::kernels
