// The fp8 forward on the host (forward_families.hpp): its validity, its configs, its default
// tile per head dim and its kernel by name (Fp8ForwardTraits' arguments,
// attention/fp8/fp8_forward_traits.cuh).
#include "attention/attention_common.hpp"
#include "attention/forward_families.hpp"
#include "attention/fp8/fp8_forward_traits.cuh"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace space = flashjit::fp8_forward_space;

namespace {

/// The tiles the space holds, by Br, Bc and warps.
constexpr int kBlockM[] = {64, 128};
constexpr int kBlockN[] = {32, 64, 128};
constexpr int kWarps[] = {4, 8};

ForwardConfig fp8_config(int head_dim, int block_m, int block_n, int warps, MaskKind mask,
                         bool softcap) {
  return {DType::e4m3, head_dim, block_m, block_n, warps, 2, mask, softcap, Fp8Options{}};
}

}  // namespace

bool fp8_forward_config_valid(const ForwardConfig& c) {
  return c.dtype == DType::e4m3 && c.stages == 2 && !c.inference_layout() &&
         space::config_valid(c.head_dim, c.block_m, c.block_n, c.warps);
}

int fp8_forward_shared_bytes(const ForwardConfig& c) {
  return space::shared_bytes(c.head_dim, c.block_m, c.block_n);
}

std::vector<ForwardConfig> fp8_forward_configs(int head_dim, MaskKind mask, bool softcap) {
  std::vector<ForwardConfig> configs;
  for (int block_m : kBlockM) {
    for (int block_n : kBlockN) {
      for (int warps : kWarps) {
        const ForwardConfig config = fp8_config(head_dim, block_m, block_n, warps, mask, softcap);
        if (config.valid()) configs.push_back(config);
      }
    }
  }
  return configs;
}

/// Br 128 over 8 warps (16 rows a warp), Bc 64 up to a padded head dim of 128 and 32 above:
/// ptxas (CUDA 13) leaves every such kernel spill-free on sm_89 (93-206 registers) and up to
/// 192 on sm_90a (113-254); at 256 sm_90a's kernel spills (its fp8 mma.sync is converted to
/// 16-bit products, which takes registers), the wgmma form being the Hopper kernel to come.
/// With 32 rows a warp (Br 128, 4 warps) ptxas spilled from head dim 128 on sm_89. The tiles
/// fit 99 KB (sm_89's limit): 55 KB at head dim 256.
ForwardConfig fp8_forward_config(int head_dim, MaskKind mask, bool softcap,
                                 const std::string& arch) {
  if (!runs_fp8_mma(arch)) {
    throw InvalidArgument("dtype",
                          "is e4m3: the fp8 forward needs fp8 tensor cores (sm_89 or "
                          "later), not " +
                              arch);
  }
  if (!space::head_dim_supported(head_dim)) {
    throw InvalidArgument("head_dim", "is " + std::to_string(head_dim) +
                                          "; the fp8 forward takes multiples of 16 from 16 to 256");
  }
  const int block_n = space::padded_head_dim(head_dim) <= 128 ? 64 : 32;
  const ForwardConfig config = fp8_config(head_dim, 128, block_n, 8, mask, softcap);
  if (!config.valid() || config.shared_bytes() > arch_shared_memory_limit(arch)) {
    throw InvalidArgument("head_dim", "is " + std::to_string(head_dim) +
                                          ": the fp8 forward's tiles do not fit " + arch);
  }
  return config;
}

ForwardKernel fp8_forward_kernel(const ForwardConfig& config) {
  ForwardKernel kernel{"attention/fp8/fp8_forward_kernel.cuh",
                       "flashjit::attention_forward_fp8_kernel",
                       TemplateArguments("flashjit::Fp8ForwardTraits")};
  kernel.traits.add("HeadDim", config.head_dim)
      .add("BlockM", config.block_m)
      .add("BlockN", config.block_n)
      .add("Warps", config.warps)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap);
  return kernel;
}

}  // namespace flashjit::kernels
