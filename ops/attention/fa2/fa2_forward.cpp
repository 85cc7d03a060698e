// FlashAttention-2's forward on the host (forward_families.hpp): its config space, its default
// tile per head dim and arch, and its kernel by name (ForwardTraits' arguments,
// attention/fa2/forward_traits.cuh, with the SequenceLayout the inference forms give it).
#include <algorithm>

#include "attention/attention_common.hpp"
#include "attention/fa2/forward_space.cuh"
#include "attention/forward_families.hpp"

namespace flashjit::kernels {
namespace space = flashjit::attention_forward_space;
namespace {

/// The forward tiles per head dim and arch, best first: FlashAttention-2's shapes (Br 128, 4
/// warps of 32 rows: each warp's ldmatrix reads of K and V feed twice the tensor work of 16
/// rows), made smaller until nothing spills. A thread holds S and O in fp32 registers, (Bc + D)
/// x rows per warp / 32 of them, beside its addresses and fragments. Spills and local memory
/// were read from ptxas (NVRTC 13.0) for every entry on sm_80 and sm_90a, and the compile
/// matrix (tests/ops/test_attention_compile.cpp) keeps it so:
/// - D <= 64: Bc 64 with Q in registers (240 registers on sm_80, 232 on sm_90a: fewer than
///   without, as Q's per-block ldmatrix loads no longer need registers of their own).
/// - D <= 96, and D <= 128 where two K/V stages of it fit (sm_80): Bc 64, FlashAttention-2's
///   A100 tile at 128. It fits because P is rounded to 16 bits before O += P V (to_operand),
///   freeing 32 fp32 registers; before that it spilled 8 to 176 bytes. With one stage (all that
///   fits sm_86/sm_89's 99 KB) it spills 24 to 144 bytes, and on sm_90a 24 to 276 bytes with
///   two (ptxas allocates differently there), so those take Bc 32: on sm_90 the Hopper kernels
///   are the way past that limit.
/// - D <= 144: Bc 32 with 4 warps (176 or fewer accumulators); above, 8 warps of 16 rows: Bc 64
///   up to D = 208, Bc 32 above (32 rows per warp spill from D = 152).
/// Bench: the work counters before and after, bench/results/2026-11-24-work-counters-*.md.
/// Later entries need less shared memory, for GPUs with 99 KB (sm_86, sm_89).
/// - The inference layouts' per-row index arithmetic (offsets, pages, packed heads) costs
///   registers: their prefill at head dim 128 keeps Bc 32, as with one stage (Bc 64 spilled
///   176-280 bytes on sm_80, NVRTC 13.0).
std::vector<TileShape> preferred_tiles(int head_dim, const std::string& arch, bool inference) {
  const int padded = space::padded_head_dim(head_dim);
  const bool hopper = arch.rfind("sm_90", 0) == 0;
  const bool two_stages_of_bc64 =
      space::shared_bytes(head_dim, 128, 64, 2) <= arch_shared_memory_limit(arch);
  if (padded <= 64) return {{128, 64, 4, true}, {128, 64, 4}, {128, 32, 4}, {64, 64, 4}};
  if (padded <= 96) return {{128, 64, 4}, {128, 128, 8}, {128, 64, 8}, {64, 64, 4}};
  if (padded <= 144) {
    std::vector<TileShape> tiles = {
        {128, 32, 4}, {128, 64, 8}, {128, 32, 8}, {64, 64, 4}, {64, 32, 4}};
    if (padded <= 128 && two_stages_of_bc64 && !hopper && !inference) {
      tiles.insert(tiles.begin(), {128, 64, 4});
    }
    return tiles;
  }
  if (padded <= 208) return {{128, 64, 8}, {128, 32, 8}, {64, 64, 4}, {64, 32, 4}};
  return {{128, 32, 8}, {64, 32, 4}};
}

}  // namespace

std::vector<ForwardConfig> fa2_forward_configs(DType dtype, int head_dim, MaskKind mask,
                                               bool softcap) {
  std::vector<ForwardConfig> configs;
  for (int block_m : space::kBlockM) {
    for (int block_n : space::kBlockN) {
      for (int warps : space::kWarps) {
        for (int stages : space::kStages) {
          for (bool q_in_registers : space::kQInRegisters) {
            const ForwardConfig config{dtype,   head_dim, block_m,
                                       block_n, warps,    stages,
                                       mask,    softcap,  Fa2Options{q_in_registers}};
            if (config.valid()) configs.push_back(config);
          }
        }
      }
    }
  }
  return configs;
}

ForwardConfig mma_sync_forward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                      const std::string& arch, std::int64_t rows, bool inference) {
  check_attention_support(dtype, head_dim);
  const int limit = arch_shared_memory_limit(arch);
  std::vector<TileShape> tiles = preferred_tiles(head_dim, arch, inference);
  // A query block of 128 rows would be mostly empty: the 64-row tiles first.
  if (rows <= 64) {
    std::stable_partition(tiles.begin(), tiles.end(),
                          [](const TileShape& tile) { return tile.block_m == 64; });
  }
  for (const TileShape& tile : tiles) {
    ForwardConfig config{dtype,        head_dim,   tile.block_m,
                         tile.block_n, tile.warps, 1,
                         mask,         softcap,    Fa2Options{tile.q_in_registers}};
    if (!config.valid() || config.shared_bytes() > limit) continue;
    // A second K/V stage overlaps the next tile's loads with this tile's math.
    ForwardConfig pipelined = config;
    pipelined.stages = 2;
    return pipelined.valid() && pipelined.shared_bytes() <= limit ? pipelined : config;
  }
  // Unreachable with today's tables (the last preference fits 99 KB); kept so that the result
  // stays valid if the space changes: the config with the least shared memory.
  std::vector<ForwardConfig> configs = forward_configs(dtype, head_dim, mask, softcap);
  std::erase_if(configs, [](const ForwardConfig& c) { return c.path() != ForwardPath::mma_sync; });
  return least_shared_memory(configs);
}

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

std::string modifiers_argument(const ScoreModifiers& modifiers) {
  return modifiers.empty() ? kNoModifiers : modifiers.type_name();
}

std::string layout_argument(const ForwardConfig& config) {
  return config.inference_layout() ? sequence_layout_arguments(config).expression() : kDenseLayout;
}

ForwardKernel fa2_forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers) {
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
      .add("QInRegisters", config.q_in_registers())
      .add("Layout_", layout_argument(config), kDenseLayout)
      .add("Modifiers_", modifiers_argument(modifiers), kNoModifiers);
  return kernel;
}

}  // namespace flashjit::kernels
