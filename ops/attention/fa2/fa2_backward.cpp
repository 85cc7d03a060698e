// FlashAttention-2's backward (backward_families.hpp): its config space (the dK/dV kernel's
// tiles, and the dQ kernel's when deterministic), its validity, its default tiles, and its
// kernels by name: BackwardKeyTraits' and BackwardQueryTraits' arguments
// (attention/fa2/backward_traits.cuh) and the per-row kernels'.
#include <optional>
#include <vector>

#include "attention/attention_common.hpp"
#include "attention/backward_families.hpp"
#include "attention/forward_families.hpp"

namespace flashjit::kernels {
namespace space = flashjit::attention_backward_space;

namespace {

/// The dK/dV tiles per head dim, best first (the first valid one that fits the arch's shared
/// memory is the default). Bc = 128 keys per CTA over 8 warps halves the Q and dO traffic of
/// Bc = 64 (each CTA streams every query block past its keys); Br is as large as the
/// accumulator budget allows beside dK and dV (attention_backward_space::key_kernel_valid).
/// The later entries cover head dims whose width 8 warps cannot split (the atomic dQ block of
/// 64 rows needs 32-column blocks: not at 16 or 48) and sm_86/sm_89's 99 KB. Untimed: the
/// autotuner will say.
std::vector<KeyBlockTile> preferred_key_tiles(int head_dim) {
  const int padded = space::key_kernel_head_dim(head_dim);
  if (padded <= 64) return {{64, 128, 8, 2}, {64, 64, 4, 2}, {32, 64, 4, 2}};
  if (padded <= 128) return {{32, 128, 8, 2}, {64, 64, 8, 2}, {64, 64, 4, 2}, {32, 64, 4, 1}};
  return {{32, 64, 8, 2}, {64, 64, 8, 2}, {64, 32, 8, 1}, {32, 32, 4, 1}};
}

/// The dQ kernel's tiles (deterministic mode), best first: Br = Bc = 64 over 4 warps up to head
/// dim 144 (104 with softcap), then 32 x 32 over 2 warps. The cut-offs are where 64 x 64 stopped
/// compiling without spills on sm_80 and sm_90a (NVRTC 13.0) when this kernel also served the
/// atomic-free default.
std::vector<QueryBlockTile> preferred_query_tiles(int head_dim, bool softcap) {
  if (head_dim <= (softcap ? 104 : 144)) return {{64, 64, 4}, {32, 32, 2}};
  return {{32, 32, 2}};
}

/// Every config of one kernel's space, in the order of its tables.
std::vector<KeyBlockTile> key_tiles() {
  std::vector<KeyBlockTile> tiles;
  for (int block_m : space::kKeyBlockM)
    for (int block_n : space::kKeyBlockN)
      for (int warps : space::kKeyWarps)
        for (int stages : space::kKeyStages) tiles.push_back({block_m, block_n, warps, stages});
  return tiles;
}
std::vector<QueryBlockTile> query_tiles() {
  std::vector<QueryBlockTile> tiles;
  for (int block_m : space::kQueryBlockM)
    for (int block_n : space::kQueryBlockN)
      for (int warps : space::kQueryWarps) tiles.push_back({block_m, block_n, warps});
  return tiles;
}

}  // namespace

bool fa2_backward_config_valid(const BackwardConfig& config) {
  const KeyBlockTile& key = config.key;
  const QueryBlockTile& query = config.query;
  if (!space::key_kernel_valid(config.head_dim, key.block_m, key.block_n, key.warps, key.stages,
                               config.softcap, !config.deterministic)) {
    return false;
  }
  return config.deterministic
             ? space::query_kernel_valid(config.head_dim, query.block_m, query.block_n, query.warps,
                                         config.softcap)
             : query == QueryBlockTile{};
}

std::vector<BackwardConfig> fa2_backward_configs(DType dtype, int head_dim, MaskKind mask,
                                                 bool softcap, bool deterministic) {
  std::vector<BackwardConfig> configs;
  const std::vector<QueryBlockTile> queries =
      deterministic ? query_tiles() : std::vector<QueryBlockTile>{QueryBlockTile{}};
  for (const KeyBlockTile& key : key_tiles()) {
    for (const QueryBlockTile& query : queries) {
      BackwardConfig config{dtype, head_dim, mask, softcap, deterministic, key, query};
      if (config.valid()) configs.push_back(config);
    }
  }
  return configs;
}

std::optional<BackwardConfig> fa2_backward_default(DType dtype, int head_dim, MaskKind mask,
                                                   bool softcap, bool deterministic, int limit) {
  BackwardConfig config{dtype, head_dim, mask, softcap, deterministic, {}, {}};
  // Each kernel takes its own first choice that fits: their shared memory is separate.
  bool found = !deterministic;
  for (const QueryBlockTile& query :
       deterministic ? preferred_query_tiles(head_dim, softcap) : std::vector<QueryBlockTile>{}) {
    config.query = query;
    found =
        space::query_kernel_valid(head_dim, query.block_m, query.block_n, query.warps, softcap) &&
        config.query_shared_bytes() <= limit;
    if (found) break;
  }
  for (const KeyBlockTile& key :
       found ? preferred_key_tiles(head_dim) : std::vector<KeyBlockTile>{}) {
    config.key = key;
    if (config.valid() && config.shared_bytes() <= limit) return config;
  }
  return std::nullopt;
}

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

BackwardKernel fa2_row_kernel(const std::string& kernel, DType dtype, bool varlen, bool permuted) {
  // A function template of its own arguments: the kernel's name is the template's.
  BackwardKernel row{"attention/fa2/backward_" + kernel + ".cuh", "",
                     TemplateArguments("flashjit::attention_backward_" + kernel)};
  row.traits.add("T", template_element(dtype))
      .add("Varlen", varlen, false)
      .add("Permuted", permuted, false);
  return row;
}

}  // namespace flashjit::kernels
