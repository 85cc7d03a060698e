// The wide forward on the host (forward_families.hpp): its validity, its config for a call,
// and its kernel by name (WideForwardTraits' arguments, attention/wide/wide_forward_traits.cuh).
#include <algorithm>
#include <utility>

#include "attention/attention_common.hpp"
#include "attention/forward_families.hpp"
#include "attention/wide/wide_forward_space.cuh"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace wide = flashjit::wide_forward_space;

/// The wide path's part of ForwardConfig::valid: its space's predicate, its warps, 16-bit
/// caches.
bool wide_forward_config_valid(const ForwardConfig& c) {
  if (c.warpgroups()) {
    return !c.kv_e4m3 && (!c.paged || c.varlen) && c.warps == wide::kWgmmaWarps &&
           wide::wgmma_config_valid(c.head_dim, c.head_dim_v(), c.block_m, c.block_n,
                                    c.column_groups(), c.stages, c.values_in_keys());
  }
  return !c.kv_e4m3 && (!c.paged || c.varlen) &&
         c.warps == wide::warps(c.block_m, c.column_groups()) &&
         wide::config_valid(c.head_dim, c.head_dim_v(), c.block_m, c.block_n, c.column_groups(),
                            c.stages, c.values_in_keys());
}

ForwardConfig wide_forward_config(DType dtype, int head_dim, int head_dim_v, MaskKind mask,
                                  bool softcap, bool values_in_keys, const std::string& arch,
                                  std::int64_t rows) {
  if (dtype != DType::f16 && dtype != DType::bf16) {
    throw InvalidArgument("dtype",
                          "is " + std::string(dtype_name(dtype)) + "; supported: f16, bf16");
  }
  const int limit = arch_shared_memory_limit(arch);
  // On sm_90a with V in the keys (MLA's absorbed decoding), the wgmma form: at 128 heads each
  // key byte feeds ~240 flops, which mma.sync's rate cannot keep up with.
  if (runs_wgmma(arch) && values_in_keys) {
    ForwardConfig config{dtype,
                         head_dim,
                         wide::kWgmmaBlockM,
                         wide::kWgmmaBlockN,
                         wide::kWgmmaWarps,
                         wide::kWgmmaStages,
                         mask,
                         softcap};
    config.options = WideOptions{.head_dim_v = head_dim_v,
                                 .column_groups = wide::kWgmmaGroups,
                                 .values_in_keys = true,
                                 .warpgroups = true};
    if (config.valid() && config.shared_bytes() <= limit) return config;
  }
  // (Br, column groups): 64 rows read each K block once for twice the rows; with at most 32
  // to fill, 32 rows and four groups (half the registers a thread).
  std::vector<std::pair<int, int>> shapes = {{64, 2}, {32, 4}};
  if (rows <= 32) std::swap(shapes[0], shapes[1]);
  int least = 0;  // the smallest shared memory among the valid configs, for the error
  for (const bool in_keys : {values_in_keys, false}) {  // V in the keys needs two stages
    for (const auto& [block_m, groups] : shapes) {
      for (const int block_n : {64, 32}) {
        for (const int stages : {2, 1}) {
          ForwardConfig config{dtype,  head_dim, block_m, block_n, wide::warps(block_m, groups),
                               stages, mask,     softcap};
          config.options = WideOptions{
              .head_dim_v = head_dim_v, .column_groups = groups, .values_in_keys = in_keys};
          if (!config.valid()) continue;
          if (config.shared_bytes() <= limit) return config;
          least = least == 0 ? config.shared_bytes() : std::min(least, config.shared_bytes());
        }
      }
    }
  }
  throw InvalidArgument("attention.head_dim",
                        "is " + std::to_string(head_dim) + " (head_dim_v " +
                            std::to_string(head_dim_v) + "): its smallest tiles need " +
                            std::to_string(least) + " bytes of shared memory, " + arch +
                            " grants a block " + std::to_string(limit));
}

namespace {

ForwardKernel wide_wgmma_kernel(const ForwardConfig& config) {
  ForwardKernel kernel{"attention/wide/wide_wgmma_kernel.cuh",
                       "flashjit::attention_forward_wide_wgmma_kernel",
                       TemplateArguments("flashjit::WideWgmmaTraits")};
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("HeadDimV", config.head_dim_v())
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap)
      .add("Layout_", layout_argument(config), kDenseLayout);
  return kernel;
}

}  // namespace

ForwardKernel wide_forward_kernel(const ForwardConfig& config) {
  if (config.warpgroups()) return wide_wgmma_kernel(config);
  ForwardKernel kernel{"attention/wide/wide_forward_kernel.cuh",
                       "flashjit::attention_forward_wide_kernel",
                       TemplateArguments("flashjit::WideForwardTraits")};
  kernel.traits.add("Element_", template_element(config.dtype))
      .add("HeadDim", config.head_dim)
      .add("HeadDimV", config.head_dim_v())
      .add("BlockM", config.block_m)
      .add("BlockN", config.block_n)
      .add("Groups", config.column_groups())
      .add("Stages", config.stages)
      .add("Mask", mask_argument(config.mask))
      .add("Softcap", config.softcap)
      .add("ValuesInKeys", config.values_in_keys())
      .add("Layout_", layout_argument(config), kDenseLayout);
  return kernel;
}

}  // namespace flashjit::kernels
