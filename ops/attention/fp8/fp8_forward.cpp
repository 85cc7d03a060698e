// The fp8 forward on the host (forward_families.hpp): its validity, its configs, its default
// tile per head dim and its kernel by name: the mma.sync form's (Fp8ForwardTraits' arguments,
// attention/fp8/fp8_forward_traits.cuh) and sm_90a's TMA and wgmma form's (Fp8TmaTraits',
// attention/fp8/fp8_tma_traits.cuh).
#include "attention/attention_common.hpp"
#include "attention/forward_families.hpp"
#include "attention/fp8/fp8_forward_traits.cuh"
#include "attention/fp8/fp8_tma_space.cuh"
#include "attention/hopper/attention_forward_tma.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace space = flashjit::fp8_forward_space;
namespace tma_space = flashjit::fp8_tma_space;

namespace {

/// The tiles the space holds, by Br, Bc and warps.
constexpr int kBlockM[] = {64, 128};
constexpr int kBlockN[] = {32, 64, 128};
constexpr int kWarps[] = {4, 8};

ForwardConfig fp8_config(int head_dim, int block_m, int block_n, int warps, MaskKind mask,
                         bool softcap) {
  return {DType::e4m3, head_dim, block_m, block_n, warps, 2, mask, softcap, Fp8Options{}};
}

/// The TMA and wgmma form's config of Br `block_m` (one or two consumer warpgroups).
ForwardConfig fp8_tma_config(int head_dim, int block_m, bool pingpong, MaskKind mask,
                             bool softcap) {
  return {DType::e4m3,
          head_dim,
          block_m,
          tma_space::kBlockN,
          tma_forward_threads(block_m) / 32,
          tma_space::kStages,
          mask,
          softcap,
          Fp8Options{.tma = true, .pingpong = pingpong}};
}

}  // namespace

bool fp8_forward_config_valid(const ForwardConfig& c) {
  if (c.dtype != DType::e4m3 || c.stages != 2 || c.inference_layout()) return false;
  return c.fp8_tma()
             ? tma_space::config_valid(c.head_dim, c.block_m, c.block_n, c.warps, c.pingpong())
             : space::config_valid(c.head_dim, c.block_m, c.block_n, c.warps);
}

int fp8_forward_shared_bytes(const ForwardConfig& c) {
  return c.fp8_tma() ? tma_space::shared_bytes(c.head_dim, c.block_m)
                     : space::shared_bytes(c.head_dim, c.block_m, c.block_n);
}

void add_fp8_tma_forward_launch(ForwardLaunch& launch, const ForwardConfig& config,
                                const Attention& attention) {
  launch.maps = fp8_forward_tma_maps(launch.params, attention, config.block_m, config.block_n);
  launch.shape.grid_x *= launch.shape.grid_y * launch.shape.grid_z;  // (TileSchedule's count)
  launch.shape.grid_y = launch.shape.grid_z = 1;
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
  for (int block_m : {64, 128}) {
    for (bool pingpong : {false, true}) {
      const ForwardConfig config = fp8_tma_config(head_dim, block_m, pingpong, mask, softcap);
      if (config.valid()) configs.push_back(config);
    }
  }
  return configs;
}

/// On sm_90a from head dim 64, the TMA and wgmma form with Br 128 (two consumer warpgroups,
/// taking turns at the products up to a padded head dim of 128, as the 16-bit default does):
/// sm_90a's fp8 mma.sync is converted to 16-bit products, so only wgmma's e4m3 form runs at
/// fp8's rate there. Elsewhere (and with `allow_tma` false), the mma.sync form: Br 128 over 8
/// warps (16 rows a warp), Bc 64 up to a padded head dim of 128 and 32 above: ptxas (CUDA 13)
/// leaves every such kernel spill-free on sm_89 (93-206 registers) and up to 192 on sm_90a
/// (113-254; at 256 it spills). With 32 rows a warp (Br 128, 4 warps) ptxas spilled from head
/// dim 128 on sm_89. The tiles fit 99 KB (sm_89's limit): 55 KB at head dim 256.
ForwardConfig fp8_forward_config(int head_dim, MaskKind mask, bool softcap, const std::string& arch,
                                 bool allow_tma) {
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
  if (allow_tma && runs_wgmma(arch)) {
    const ForwardConfig tma =
        fp8_tma_config(head_dim, 128, tma_space::overlaps(head_dim), mask, softcap);
    if (tma.valid()) return tma;
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
  if (config.fp8_tma()) {
    ForwardKernel kernel{"attention/fp8/fp8_tma_kernel.cuh",
                         "flashjit::attention_forward_fp8_tma_kernel",
                         TemplateArguments("flashjit::Fp8TmaTraits")};
    kernel.traits.add("HeadDim", config.head_dim)
        .add("BlockM", config.block_m)
        .add("Mask", mask_argument(config.mask))
        .add("Softcap", config.softcap)
        .add("Pingpong", config.pingpong());
    return kernel;
  }
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
