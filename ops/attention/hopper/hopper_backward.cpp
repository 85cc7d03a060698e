// The Hopper backward (backward_families.hpp): its config space, its validity, its default on
// sm_90a, the TMA maps of a call, and its kernel by name: TmaBackwardTraits' arguments
// (attention/hopper/tma_backward_traits.cuh).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_common.hpp"
#include "attention/backward_families.hpp"
#include "attention/forward_families.hpp"
#include "attention/hopper/attention_forward_tma.hpp"
#include "attention/hopper/tma_backward_space.cuh"

namespace flashjit::kernels {

namespace {

/// The config with Bc = block_n (its warps: a consumer warpgroup per 64 keys, or two sharing
/// them, and the producer's), `stages` Q/dO slots and Br = block_m; valid() says whether the
/// kernel takes it.
BackwardConfig tma_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                          bool deterministic, int block_n, int stages, bool shared_keys,
                          int block_m = kTmaBackwardBlockM) {
  BackwardConfig config{dtype, head_dim, mask, softcap, deterministic, {}, {}};
  config.key = {block_m, block_n, tma_backward_threads(block_n, shared_keys) / 32, stages};
  config.tma = true;
  return config;
}

}  // namespace

bool tma_backward_config_valid(const BackwardConfig& config) {
  return config.query == QueryBlockTile{} &&
         config.key.warps * 32 == tma_backward_threads(config.key.block_n, config.shared_keys()) &&
         tma_backward_valid(config.head_dim, config.key.block_n, config.key.stages,
                            config.shared_keys(), config.deterministic, config.key.block_m);
}

std::vector<BackwardConfig> tma_backward_configs(DType dtype, int head_dim, MaskKind mask,
                                                 bool softcap, bool deterministic) {
  std::vector<BackwardConfig> configs;
  for (const auto& [block_n, shared_keys] : {std::pair{64, false}, {64, true}, {128, false}}) {
    for (int stages : {1, 2}) {
      for (int block_m : {kTmaBackwardBlockM, 128}) {
        const BackwardConfig config = tma_config(dtype, head_dim, mask, softcap, deterministic,
                                                 block_n, stages, shared_keys, block_m);
        if (config.valid()) configs.push_back(config);
      }
    }
  }
  return configs;
}

std::optional<BackwardConfig> tma_backward_default(DType dtype, int head_dim, MaskKind mask,
                                                   bool softcap, bool deterministic, bool modified,
                                                   int limit) {
  // From head dim 64, where it compiles without spills (NVRTC 13.0): timed at 1.5x the mma.sync
  // default at head dim 128 on an H100, 1.9-2.1x on an H200, where two Q/dO stages ran 1.14x
  // one (bench/results, 2026-11-27). Up to a padded head dim of 128, two consumer warpgroups
  // over Bc = 128; above it, and at 128 with softcap (whose chain, 1 − tanh² kept per score,
  // spilled 256 bytes there) or modifiers (each score's slope kept as softcap's is), two
  // warpgroups sharing Bc = 64 keys, with two stages where they fit in shared memory (to 192)
  // and one where not. The deterministic mode orders the same kernel's dQ sums (in its dQ
  // writer warp, off the math warps' registers).
  // At a padded head dim of 64, Br 128 (FlashAttention-3's 128 × 128): half the steps, each
  // twice the products, for the fixed cost of a step (barriers, waits, the hand-over of dQ)
  // that made head dim 64 the slowest against cuDNN (0.51-0.68 on an H200, 2026-11-27). Not
  // with softcap or modifiers: their per-score slope (64 registers more) spilled it and
  // serialized its wgmmas (C7512).
  if (head_dim < 64) return std::nullopt;
  const int padded = tma_forward_padded_head_dim(head_dim);
  const bool shared_keys = padded > 128 || (padded == 128 && (softcap || modified));
  const int block_m =
      !softcap && !modified && tma_backward_block_m_valid(head_dim, 128, shared_keys) ? 128 : 64;
  // Two stages at 256 take dQ from registers (tma_backward_dq_from_registers): in the tuning
  // space, not the default until a GPU has timed it against one stage.
  for (int stages : {2, 1}) {
    const BackwardConfig config = tma_config(dtype, head_dim, mask, softcap, deterministic,
                                             shared_keys ? 64 : 128, stages, shared_keys, block_m);
    const bool from_registers =
        tma_backward_dq_from_registers(head_dim, config.key.block_n, stages, config.shared_keys());
    if (config.valid() && config.shared_bytes() <= limit && !from_registers) return config;
  }
  return std::nullopt;
}

TmaBackwardMaps tma_backward_maps(const std::string& arch, const TensorView& q, const TensorView& k,
                                  const TensorView& v, const TensorView& dout,
                                  const BackwardConfig& config) {
  if (!runs_wgmma(arch)) return {{}, "it runs on sm_90a only; the target is " + arch};
  TmaBackwardMaps result{backward_tma_maps(q, k, v, dout, config.key.block_m, config.key.block_n),
                         ""};
  const std::string problem = tma_maps_problem(result.maps, "dout");
  if (!problem.empty()) result.problem = "TMA cannot read the tensors: " + problem;
  return result;
}

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
      .add("Modifiers_", modifiers_argument(modifiers), kNoModifiers)
      .add("BlockM", config.key.block_m, kTmaBackwardBlockM);
  return kernel;
}

}  // namespace flashjit::kernels
