// The decode kernel on the host (forward_families.hpp, attention_inference_config.hpp): its
// validity and shared memory, its configs and its default for a decoding call, and its kernel by
// name (DecodeTraits' arguments, attention/decode/decode_traits.cuh).
#include <utility>

#include "attention/attention_common.hpp"
#include "attention/decode/decode_space.cuh"
#include "attention/forward_families.hpp"
#include "attention/inference/attention_inference_config.hpp"

namespace flashjit::kernels {
namespace decode = flashjit::attention_decode_space;

bool decode_forward_config_valid(const ForwardConfig& c) {
  return (!c.paged || c.varlen) && (!c.kv_e4m3 || c.varlen) &&
         decode::config_valid(c.head_dim, c.block_m, c.block_n, c.warps, c.stages, c.kv_e4m3);
}

int decode_forward_shared_bytes(const ForwardConfig& c) {
  return decode::shared_bytes(c.head_dim, c.block_m, c.block_n, c.warps, c.stages, c.kv_e4m3);
}

namespace {

ForwardConfig decode_tile(DType dtype, int head_dim, MaskKind mask, bool softcap, int rows,
                          int keys, int warps, int stages, bool kv_e4m3) {
  ForwardConfig config{dtype, head_dim, rows, keys, warps, stages, mask, softcap};
  config.options = DecodeOptions{};
  // (Validity with an fp8 cache needs the per-sequence layout it comes with.)
  config.varlen = config.kv_e4m3 = kv_e4m3;
  return config;
}

/// The tile as the inference configs take it: layout flags off (with_layout sets the call's).
ForwardConfig without_layout(ForwardConfig config) {
  config.varlen = config.kv_e4m3 = false;
  return config;
}

}  // namespace

std::vector<ForwardConfig> decode_forward_tiles(DType dtype, int head_dim, MaskKind mask,
                                                bool softcap, int rows, bool kv_e4m3) {
  std::vector<ForwardConfig> configs;
  for (int keys : decode::kKeys) {
    for (int warps : {4, 8}) {
      for (int stages : {2, 3, 4, 6}) {
        const ForwardConfig config =
            decode_tile(dtype, head_dim, mask, softcap, rows, keys, warps, stages, kv_e4m3);
        if (config.valid()) configs.push_back(without_layout(config));
      }
    }
  }
  return configs;
}

std::optional<ForwardConfig> decode_forward_config(DType dtype, int head_dim, MaskKind mask,
                                                   bool softcap, const std::string& arch,
                                                   std::int64_t rows, bool kv_e4m3) {
  check_attention_support(dtype, head_dim);
  const int limit = arch_shared_memory_limit(arch);
  const int tile_rows = decode::tile_rows(rows);
  // Eight warps of 16-key chunks where the shared memory holds three stages each (sm_90a up to
  // head dim 128: two chunks in flight a warp, 128 KB an SM), else four warps with as many
  // stages as fit (up to five chunks in flight a warp; sm_80 at head dim 128: three). The
  // decode kernel's warp runs a chain of dependent instructions per chunk (page arithmetic,
  // eight accumulating mma.sync, the row reductions), so one warp per scheduler leaves the
  // scheduler idle on each dependency; two per scheduler cover each other's
  // (docs/inference.md, "The decode kernel").
  for (const auto& [warps, fewest_stages] : {std::pair{8, 3}, std::pair{4, 2}, std::pair{2, 2}}) {
    for (int stages = 6; stages >= fewest_stages; --stages) {
      const ForwardConfig config =
          decode_tile(dtype, head_dim, mask, softcap, tile_rows, 16, warps, stages, kv_e4m3);
      if (config.valid() && config.shared_bytes() <= limit) return without_layout(config);
    }
  }
  return std::nullopt;
}

ForwardKernel decode_forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers) {
  ForwardKernel kernel{"attention/decode/decode_kernel.cuh", "flashjit::attention_decode_kernel",
                       TemplateArguments("flashjit::DecodeTraits")};
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("Rows", config.block_m)
      .add("Keys", config.block_n)
      .add("Warps", config.warps)
      .add("Stages", config.stages)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap)
      .add("Layout_", sequence_layout_arguments(config).expression())
      .add("Modifiers_", modifiers_argument(modifiers), kNoModifiers);
  return kernel;
}

}  // namespace flashjit::kernels
