// The Hopper forwards on the host (forward_families.hpp): the wgmma and TMA forwards' config
// spaces, the TMA forward's default tile and schedule, and both kernels by name
// (TmaForwardTraits' arguments, attention/hopper/tma_forward_traits.cuh, and
// WgmmaForwardTraits').
#include <utility>

#include "attention/attention_common.hpp"
#include "attention/forward_families.hpp"
#include "attention/hopper/attention_forward_tma.hpp"
#include "attention/hopper/tma_forward_space.cuh"

namespace flashjit::kernels {
namespace {

/// The TMA config of (Br, Bc) with FlashAttention-3's schedule: overlap everywhere, pingpong
/// between two warpgroups up to head dim 128.
ForwardConfig tma_config(DType dtype, int head_dim, MaskKind mask, bool softcap, int block_m,
                         int block_n) {
  ForwardConfig config{dtype, head_dim, block_m, block_n, tma_forward_threads(block_m) / 32,
                       2,     mask,     softcap};
  config.options = TmaOptions{
      .overlap = true, .pingpong = block_m == 128 && tma_forward_padded_head_dim(head_dim) <= 128};
  return config;
}

}  // namespace

/// The TMA path's default tile, FlashAttention-3's for 16-bit inputs where
/// it compiles without spills on sm_90a with setmaxnreg giving two consumer warpgroups 240
/// registers a thread (tests/ops/test_attention_compile.cpp checks it): 128 x 176 up to
/// head dim 128 (128 x 128 with a mask, where FlashAttention-3 takes 128 for causal and local);
/// 128 x 112 up to 192 (96 with a window); 128 x 80 up to 256 (64 with a window). Up to head
/// dim 64 FlashAttention-3 runs 192 x 128 on three warpgroups of 160 registers; ours spills
/// 16-76 bytes there (ptxas, NVRTC 13.0), so 128 x 128 until a GPU says which is faster.
/// Persistent (one CTA per SM walking the tiles) up to head dim 64, and to 128 with a mask;
/// 2-CTA clusters sharing K and V from head dim 128 without a mask.
/// Padded head dims count (96 runs as 128). nullopt where the head dim is outside the path or
/// the tile outgrows `limit`.
std::optional<ForwardConfig> tma_default_config(DType dtype, int head_dim, MaskKind mask,
                                                bool softcap, int limit) {
  const int padded = tma_forward_padded_head_dim(head_dim);
  const bool masked = mask == MaskKind::window;
  const int block_m = 128;
  const int block_n = padded <= 64    ? 128
                      : padded <= 128 ? (masked ? 128 : 176)
                      : padded <= 192 ? (masked ? 96 : 112)
                                      : (masked ? 64 : 80);
  ForwardConfig config = tma_config(dtype, head_dim, mask, softcap, block_m, block_n);
  // Persistent where ptxas keeps it in registers: its tile loop costs the main loop a few
  // registers, and with the larger tiles it spills
  // (bench/results/2026-11-26-tma-forward-pipeline.md).
  config.tma().persistent = padded <= 64 || (padded <= 128 && masked);
  // 2-CTA clusters sharing K and V where FlashAttention-3 has them: head dims from 128,
  // unmasked (plan_attention_forward runs the unclustered twin for an odd number of query
  // blocks, as FlashAttention-3 does).
  config.tma().cluster = padded >= 128 && !masked && !config.persistent();
  if (!config.valid() || config.shared_bytes() > limit) return std::nullopt;
  return config;
}

void add_tma_forward_launch(ForwardLaunch& launch, const ForwardConfig& config,
                            const Attention& attention, const DeviceInfo& device) {
  const int cluster_blocks = config.cluster_blocks();
  launch.maps =
      forward_tma_maps(launch.params, attention, config.block_m, config.block_n / cluster_blocks);
  const long long tiles = tma_forward_tiles(
      launch.shape.grid_x, static_cast<long long>(launch.shape.grid_y) * launch.shape.grid_z,
      cluster_blocks);
  launch.shape.grid_x =
      static_cast<unsigned>(config.persistent() ? tma_forward_ctas(tiles, device.sm_count) : tiles);
  launch.shape.grid_y = launch.shape.grid_z = 1;
  launch.shape.cluster_x = static_cast<unsigned>(cluster_blocks);
  launch.takes_tiles =
      tma_forward_takes_tiles(config.persistent(), config.mask != MaskKind::none, config.kv_e4m3);
}

std::vector<ForwardConfig> hopper_forward_configs(DType dtype, int head_dim, MaskKind mask,
                                                  bool softcap) {
  std::vector<ForwardConfig> configs;
  for (int block_m : {64, 128}) {
    for (int block_n : {64, 128}) {
      ForwardConfig config{dtype, head_dim, block_m, block_n, block_m / 16, 1, mask, softcap};
      config.options = WgmmaOptions{};
      if (config.valid()) configs.push_back(config);
    }
  }
  // Three stages and the persistent schedule only with the overlapped schedules: the plain loop
  // waits for each product, so loads further ahead cannot help it; persistent only with P in
  // registers, whose configs are the ones that stay clear of spills.
  const int padded = tma_forward_padded_head_dim(head_dim);
  for (int block_m : kTmaBlockM) {
    for (int block_n : kTmaBlockN) {
      for (auto [overlap, pingpong] : {std::pair{false, false}, {true, false}, {true, true}}) {
        for (int stages : kTmaStages) {
          for (bool p_in_shared : {false, true}) {
            for (bool persistent : {false, true}) {
              for (bool cluster : {false, true}) {
                if (stages > 2 && !overlap) continue;  // (persistent without overlap is invalid)
                if (persistent && p_in_shared) continue;
                // Clusters with FlashAttention-3's schedule (overlap, P in registers) from head
                // dim 128, where it takes them: K and V tiles large enough for the halved
                // reads to matter.
                if (cluster && (!overlap || p_in_shared || padded < 128)) continue;
                ForwardConfig config{
                    dtype,  head_dim, block_m, block_n, tma_forward_threads(block_m) / 32,
                    stages, mask,     softcap};
                config.options = TmaOptions{.overlap = overlap,
                                            .pingpong = pingpong,
                                            .p_in_shared = p_in_shared,
                                            .persistent = persistent,
                                            .cluster = cluster};
                if (config.valid()) configs.push_back(config);
              }
            }
          }
        }
      }
    }
  }
  return configs;
}

ForwardKernel tma_forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers) {
  ForwardKernel kernel{"attention/hopper/tma_forward_kernel.cuh",
                       config.cluster() ? "flashjit::attention_forward_tma_cluster_kernel"
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
      .add("Overlap", config.overlap())
      .add("Pingpong", config.pingpong())
      .add("PShared", config.p_in_shared())
      .add("Persistent", config.persistent())
      .add("Varlen", config.varlen, false)
      .add("ClusterBlocks", config.cluster() ? 2 : 1, 1)
      .add("Modifiers_", modifiers_argument(modifiers), kNoModifiers)
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
