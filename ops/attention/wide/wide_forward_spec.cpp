// The wide forward kernel by name (forward_kernels.hpp): WideForwardTraits' arguments
// (attention/wide/wide_forward_traits.cuh).
#include "attention/attention_common.hpp"
#include "attention/forward_kernels.hpp"

namespace flashjit::kernels {

ForwardKernel wide_forward_kernel(const ForwardConfig& config) {
  const std::string dense = "flashjit::DenseLayout";
  ForwardKernel kernel{"attention/wide/wide_forward_kernel.cuh",
                       "flashjit::attention_forward_wide_kernel",
                       TemplateArguments("flashjit::WideForwardTraits")};
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("HeadDimV", config.head_dim_v)
      .add("BlockM", config.block_m)
      .add("BlockN", config.block_n)
      .add("Groups", config.column_groups)
      .add("Stages", config.stages)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap)
      .add("ValuesInKeys", config.values_in_keys)
      .add("Layout_",
           config.inference_layout() ? sequence_layout_arguments(config).expression() : dense,
           dense);
  return kernel;
}

}  // namespace flashjit::kernels
