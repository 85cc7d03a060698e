// FlashAttention-2's backward kernels by name (backward_families.hpp): BackwardKeyTraits' and
// BackwardQueryTraits' arguments (attention/fa2/backward_traits.cuh) and the per-row kernels'.
#include "attention/attention_common.hpp"
#include "attention/backward_families.hpp"
#include "attention/forward_families.hpp"

namespace flashjit::kernels {

BackwardKernel fa2_dkdv_kernel(const BackwardConfig& config, const ScoreModifiers& modifiers) {
  const KeyBlockTile& t = config.key;
  BackwardKernel kernel{"attention/fa2/backward_dkdv_kernel.cuh",
                        "flashjit::attention_backward_dkdv_kernel",
                        TemplateArguments("flashjit::BackwardKeyTraits")};
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("BlockM", t.block_m)
      .add("BlockN", t.block_n)
      .add("Warps", t.warps)
      .add("Stages", t.stages)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap)
      .add("AtomicDq", !config.deterministic)
      .add("Varlen", config.varlen, false)
      .add("Modifiers_", modifiers_argument(modifiers), kNoModifiers);
  return kernel;
}

BackwardKernel fa2_dq_kernel(const BackwardConfig& config, const ScoreModifiers& modifiers) {
  const QueryBlockTile& t = config.query;
  BackwardKernel kernel{"attention/fa2/backward_dq_kernel.cuh",
                        "flashjit::attention_backward_dq_kernel",
                        TemplateArguments("flashjit::BackwardQueryTraits")};
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("BlockM", t.block_m)
      .add("BlockN", t.block_n)
      .add("Warps", t.warps)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap)
      .add("Varlen", config.varlen, false)
      .add("Modifiers_", modifiers_argument(modifiers), kNoModifiers);
  return kernel;
}

BackwardKernel fa2_row_kernel(const std::string& kernel, DType dtype, bool varlen,
                              bool permuted) {
  // A function template of its own arguments: the kernel's name is the template's.
  BackwardKernel row{"attention/fa2/backward_" + kernel + ".cuh", "",
                     TemplateArguments("flashjit::attention_backward_" + kernel)};
  row.traits.add("T", template_element(dtype))
      .add("Varlen", varlen, false)
      .add("Permuted", permuted, false);
  return row;
}

}  // namespace flashjit::kernels
