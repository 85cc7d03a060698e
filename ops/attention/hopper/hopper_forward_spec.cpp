// The Hopper forward kernels by name (forward_kernels.hpp): TmaForwardTraits' arguments
// (attention/hopper/tma_forward_traits.cuh) and WgmmaForwardTraits'.
#include "attention/attention_common.hpp"
#include "attention/forward_kernels.hpp"

namespace flashjit::kernels {

ForwardKernel tma_forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers) {
  const std::string unmodified = "flashjit::NoModifiers";
  ForwardKernel kernel{"attention/hopper/tma_forward_kernel.cuh",
                       config.cluster ? "flashjit::attention_forward_tma_cluster_kernel"
                                      : "flashjit::attention_forward_tma_kernel",
                       TemplateArguments("flashjit::TmaForwardTraits")};
  // Stages to Persistent have defaults in the declaration but are always written, as the
  // emulator's built-in instances are named.
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("BlockM", config.block_m)
      .add("BlockN", config.block_n)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap)
      .add("Stages", config.stages)
      .add("Overlap", config.overlap)
      .add("Pingpong", config.pingpong)
      .add("PShared", config.p_in_shared)
      .add("Persistent", config.persistent)
      .add("Varlen", config.varlen, false)
      .add("ClusterBlocks", config.cluster ? 2 : 1, 1)
      .add("Modifiers_", modifiers.empty() ? unmodified : modifiers.type_name(), unmodified)
      .add("KvE4m3", config.kv_e4m3, false);
  return kernel;
}

ForwardKernel wgmma_forward_kernel(const ForwardConfig& config) {
  ForwardKernel kernel{"attention/hopper/wgmma_forward_kernel.cuh",
                       "flashjit::attention_forward_wgmma_kernel",
                       TemplateArguments("flashjit::WgmmaForwardTraits")};
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("BlockM", config.block_m)
      .add("BlockN", config.block_n)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap);
  return kernel;
}

}  // namespace flashjit::kernels
