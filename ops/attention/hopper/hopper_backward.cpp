// The Hopper backward's kernel by name (backward_families.hpp): TmaBackwardTraits' arguments
// (attention/hopper/tma_backward_traits.cuh).
#include "attention/attention_common.hpp"
#include "attention/backward_families.hpp"
#include "attention/forward_families.hpp"

namespace flashjit::kernels {

BackwardKernel tma_dkdv_kernel(const BackwardConfig& config, const ScoreModifiers& modifiers) {
  BackwardKernel kernel{"attention/hopper/tma_backward_kernel.cuh",
                        "flashjit::attention_backward_tma_kernel",
                        TemplateArguments("flashjit::TmaBackwardTraits")};
  // Stages to SharedKeys have defaults in the declaration but are always written, as the
  // emulator's built-in instances are named.
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("BlockN", config.key.block_n)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap)
      .add("Stages", config.key.stages)
      .add("Deterministic", config.deterministic)
      .add("Varlen", config.varlen)
      .add("SharedKeys", config.shared_keys())
      .add("Modifiers_", modifiers_argument(modifiers), kNoModifiers);
  return kernel;
}

}  // namespace flashjit::kernels
