// FlashAttention-2's forward kernel by name (forward_kernels.hpp): ForwardTraits' arguments
// (attention/fa2/forward_traits.cuh), and the SequenceLayout the inference forms give it.
#include "attention/attention_common.hpp"
#include "attention/forward_kernels.hpp"

namespace flashjit::kernels {

std::string mask_argument(MaskKind mask) {
  return mask == MaskKind::window ? "flashjit::MaskKind::window" : "flashjit::MaskKind::none";
}

TemplateArguments sequence_layout_arguments(const ForwardConfig& config) {
  TemplateArguments layout("flashjit::SequenceLayout");
  layout.add("Varlen", config.varlen)
      .add("Paged", config.paged)
      .add("PackGqa", config.pack_gqa)
      .add("Split", config.split)
      .add("KvE4m3", config.kv_e4m3, false);
  return layout;
}

ForwardKernel fa2_forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers) {
  const std::string dense = "flashjit::DenseLayout";
  const std::string unmodified = "flashjit::NoModifiers";
  ForwardKernel kernel{"attention/fa2/forward_kernel.cuh", "flashjit::attention_forward_kernel",
                       TemplateArguments("flashjit::ForwardTraits")};
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("BlockM", config.block_m)
      .add("BlockN", config.block_n)
      .add("Warps", config.warps)
      .add("Stages", config.stages)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap)
      .add("QInRegisters", config.q_in_registers)
      .add("Layout_",
           config.inference_layout() ? sequence_layout_arguments(config).expression() : dense,
           dense)
      .add("Modifiers_", modifiers.empty() ? unmodified : modifiers.type_name(), unmodified);
  return kernel;
}

}  // namespace flashjit::kernels
