#include "attention/attention_forward.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <numbers>
#include <optional>
#include <unordered_map>
#include <utility>

#include "attention/attention_calls.hpp"
#include "attention/attention_common.hpp"
#include "attention/attention_tuning.hpp"
#include "attention/forward_kernels.hpp"
#include "attention/hopper/attention_forward_tma.hpp"
#include "attention/hopper/tma_forward_space.cuh"
#include "attention/hopper/wgmma_forward_space.cuh"
#include "attention/modifiers/attention_captures.hpp"
#include "attention/modifiers/block_mask.hpp"
#include "attention/modifiers/score_modifiers.hpp"
#include "attention/parts/key_window.cuh"
#include "attention/wide/wide_forward_space.cuh"
#include "flashjit/error.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace space = flashjit::attention_forward_space;
namespace wide = flashjit::wide_forward_space;

namespace {

bool dtype_supported(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

/// The wide path's part of ForwardConfig::valid: its space's predicate, its warps, none of the
/// other paths' options, 16-bit caches.
bool wide_config_valid(const ForwardConfig& c) {
  return !c.q_in_registers && !c.overlap && !c.pingpong && !c.p_in_shared && !c.persistent &&
         !c.cluster && !c.kv_e4m3 && (!c.paged || c.varlen) &&
         c.warps == wide::warps(c.block_m, c.column_groups) &&
         wide::config_valid(c.head_dim, c.head_dim_v, c.block_m, c.block_n, c.column_groups,
                            c.stages, c.values_in_keys);
}

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

/// The window a call really imposes, per side: -1 (unbounded; kNoWindow for the kernel) when
/// that side hides no key from any row, e.g. causal with seqlen_q = 1.
struct VisibleWindow {
  std::int64_t left;
  std::int64_t right;
};

VisibleWindow visible_window(const Attention& attention) {
  std::int64_t left = attention.window_left;
  std::int64_t right = attention.causal ? 0 : attention.window_right;
  // Row i sees j >= i + diagonal - left, diagonal = seqlen_k - seqlen_q: the last row reaches
  // key 0 once left >= seqlen_k - 1. Likewise j <= i + diagonal + right reaches the last key
  // from row 0 once right >= seqlen_q - 1. Such a window masks nothing.
  if (left >= attention.seqlen_k - 1) left = -1;
  if (right >= attention.seqlen_q - 1) right = -1;
  return {left, right};
}

int kernel_window(std::int64_t window) {
  return window < 0 ? AttentionForwardParams::kNoWindow : static_cast<int>(window);
}

std::vector<detail::KernelBuffer> forward_buffers(const TensorView& q, const TensorView& k,
                                                  const TensorView& v, const TensorView& o,
                                                  const TensorView& lse) {
  std::vector<detail::KernelBuffer> buffers = {kernel_buffer(q, "q"), kernel_buffer(k, "k"),
                                               kernel_buffer(v, "v"), kernel_buffer(o, "o")};
  if (lse.data != nullptr) buffers.push_back(kernel_buffer(lse, "lse"));
  return buffers;
}

/// The launch of a validated call with a config already checked against it, on a device like
/// `device` (its arch and SM count).
ForwardLaunch forward_launch(const DeviceInfo& device, const Attention& attention,
                             const TensorView& q, const TensorView& k, const TensorView& v,
                             const TensorView& o, const TensorView& lse,
                             const ForwardConfig& config, Stream stream) {
  ForwardLaunch launch;
  launch.params = forward_params(attention, q, k, v, o, lse);
  launch.spec = &launch_forward_spec(config, device.arch(), score_modifiers(attention));
  launch.shape = forward_launch_shape(config, attention, stream);
  launch.buffers = forward_buffers(q, k, v, o, lse);
  if (attention.block_mask.data != nullptr) {
    launch.buffers.push_back(kernel_buffer(attention.block_mask, "block_mask"));
  }
  add_capture_buffers(attention, launch.buffers);
  if (config.path != ForwardPath::tma) return launch;
  const int cluster_blocks = config.cluster_blocks();
  launch.maps =
      forward_tma_maps(launch.params, attention, config.block_m, config.block_n / cluster_blocks);
  // The grid above as tiles (TileSchedule), one CTA each (in clusters, whole clusters of them),
  // or persistent one CTA per SM.
  const long long tiles = tma_forward_tiles(
      launch.shape.grid_x, static_cast<long long>(launch.shape.grid_y) * launch.shape.grid_z,
      cluster_blocks);
  launch.shape.grid_x =
      static_cast<unsigned>(config.persistent ? tma_forward_ctas(tiles, device.sm_count) : tiles);
  launch.shape.grid_y = launch.shape.grid_z = 1;
  launch.shape.cluster_x = static_cast<unsigned>(cluster_blocks);
  return launch;
}

/// The TMA config of (Br, Bc) with FlashAttention-3's schedule: overlap everywhere, pingpong
/// between two warpgroups up to head dim 128.
ForwardConfig tma_config(DType dtype, int head_dim, MaskKind mask, bool softcap, int block_m,
                         int block_n) {
  ForwardConfig config{dtype, head_dim, block_m, block_n, tma_forward_threads(block_m) / 32,
                       2,     mask,     softcap};
  config.path = ForwardPath::tma;
  config.overlap = true;
  config.pingpong = block_m == 128 && tma_forward_padded_head_dim(head_dim) <= 128;
  return config;
}

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
std::optional<ForwardConfig> tma_default(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                         int limit) {
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
  config.persistent = padded <= 64 || (padded <= 128 && masked);
  // 2-CTA clusters sharing K and V where FlashAttention-3 has them: head dims from 128,
  // unmasked (plan_attention_forward runs the unclustered twin for an odd number of query
  // blocks, as FlashAttention-3 does).
  config.cluster = padded >= 128 && !masked && !config.persistent;
  if (!config.valid() || config.shared_bytes() > limit) return std::nullopt;
  return config;
}

}  // namespace

bool ForwardConfig::valid() const {
  if (!dtype_supported(dtype)) return false;
  if (path == ForwardPath::wide) return wide_config_valid(*this);
  if (head_dim_v != 0 || column_groups != 0 || values_in_keys) return false;  // the wide path's
  if (path != ForwardPath::tma && (overlap || pingpong || p_in_shared || persistent || cluster)) {
    return false;
  }
  if (!tma_forward_cluster_valid(block_n, cluster_blocks(), mask != MaskKind::none, persistent,
                                 inference_layout())) {
    return false;
  }
  if (persistent && !overlap) return false;
  // The TMA path takes packed sequences (varlen, one CTA per tile); the other layouts and the
  // wgmma path take none.
  const bool tma_varlen =
      path == ForwardPath::tma && varlen && !persistent && !paged && !pack_gqa && !split;
  if (path != ForwardPath::mma_sync && inference_layout() && !tma_varlen) return false;
  if (paged && !varlen) return false;  // a paged cache has per-sequence key counts
  // An fp8 cache: with per-sequence lengths, in 16-byte chunks of 16 elements, through the
  // mma.sync pipeline's two-stage staging ring or the TMA forward's packed kernel.
  if (kv_e4m3 && (!varlen || head_dim % 16 != 0 ||
                  (path == ForwardPath::mma_sync ? stages != 2 : !tma_varlen))) {
    return false;
  }
  switch (path) {
    case ForwardPath::wgmma:
      return !q_in_registers &&
             wgmma_forward_config_valid(head_dim, block_m, block_n, warps, stages);
    case ForwardPath::tma:
      return !q_in_registers &&
             tma_forward_config_valid(head_dim, block_m, block_n, warps, stages, p_in_shared,
                                      kv_e4m3) &&
             tma_forward_schedule_valid(block_m, stages, overlap, pingpong);
    case ForwardPath::wide:  // (above)
    case ForwardPath::mma_sync:
      break;
  }
  return space::config_valid(head_dim, block_m, block_n, warps, stages, q_in_registers);
}

int ForwardConfig::shared_bytes() const {
  switch (path) {
    case ForwardPath::wide:
      return wide::shared_bytes(head_dim, block_m, block_n, column_groups, stages, values_in_keys);
    case ForwardPath::wgmma:
      return wgmma_forward_shared_bytes(head_dim, block_m, block_n);
    case ForwardPath::tma:
      return tma_forward_shared_bytes(head_dim, block_m, block_n, stages, p_in_shared, kv_e4m3);
    case ForwardPath::mma_sync:
      break;
  }
  return space::shared_bytes(head_dim, block_m, block_n, stages);
}

bool runs_wgmma(const std::string& arch) { return arch == "sm_90a"; }

bool runs_on(const ForwardConfig& config, const std::string& arch) {
  return config.path == ForwardPath::mma_sync || config.path == ForwardPath::wide ||
         runs_wgmma(arch);
}

std::vector<ForwardConfig> forward_configs(DType dtype, int head_dim, MaskKind mask, bool softcap) {
  std::vector<ForwardConfig> configs;
  for (int block_m : space::kBlockM) {
    for (int block_n : space::kBlockN) {
      for (int warps : space::kWarps) {
        for (int stages : space::kStages) {
          for (bool q_in_registers : space::kQInRegisters) {
            const ForwardConfig config{dtype,  head_dim, block_m, block_n,       warps,
                                       stages, mask,     softcap, q_in_registers};
            if (config.valid()) configs.push_back(config);
          }
        }
      }
    }
  }
  for (int block_m : {64, 128}) {
    for (int block_n : {64, 128}) {
      ForwardConfig config{dtype, head_dim, block_m, block_n, block_m / 16, 1, mask, softcap};
      config.path = ForwardPath::wgmma;
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
                config.path = ForwardPath::tma;
                config.overlap = overlap;
                config.pingpong = pingpong;
                config.p_in_shared = p_in_shared;
                config.persistent = persistent;
                config.cluster = cluster;
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

namespace {

ForwardConfig default_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                             const std::string& arch, bool allow_tma) {
  check_attention_support(dtype, head_dim);
  const int limit = arch_shared_memory_limit(arch);
  if (runs_wgmma(arch)) {
    // The Hopper paths where they take the problem; neither is timed on a GPU yet against the
    // mma.sync path. First FlashAttention-3's structure (TMA), then the wgmma kernel with
    // cp.async loads: Br 128 (two warpgroups) by Bc 128 at head dims 64 and 128.
    if (allow_tma) {
      if (auto tma = tma_default(dtype, head_dim, mask, softcap, limit)) return *tma;
    }
    ForwardConfig hopper{dtype, head_dim, 128, 128, 8, 1, mask, softcap};
    hopper.path = ForwardPath::wgmma;
    if (hopper.valid() && hopper.shared_bytes() <= limit) return hopper;
  }
  return mma_sync_forward_config(dtype, head_dim, mask, softcap, arch, kMaxSeqlen, false);
}

}  // namespace

ForwardConfig modifiers_forward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                       const std::string& arch) {
  // The modifiers' index arithmetic per score takes registers that the 32-rows-per-warp tiles
  // (Br 128 with 4 warps) do not have at head dim 128 (ptxas spills); the 64-row tiles first,
  // as for a short query block, keep every head dim in registers.
  return mma_sync_forward_config(dtype, head_dim, mask, softcap, arch, /*rows=*/64,
                                 /*inference=*/false);
}

ForwardConfig modifiers_forward_config(DType dtype, const Attention& attention,
                                       const std::string& arch) {
  return modifiers_forward_config(dtype, static_cast<int>(attention.head_dim),
                                  forward_mask_kind(attention), attention.softcap > 0.0f, arch);
}

ForwardConfig dense_modifiers_forward_config(DType dtype, const Attention& attention,
                                             const std::string& arch) {
  const int head_dim = static_cast<int>(attention.head_dim);
  const MaskKind mask = forward_mask_kind(attention);
  const bool softcap = attention.softcap > 0.0f;
  if (runs_wgmma(arch)) {
    check_attention_support(dtype, head_dim);
    if (auto tma = tma_default(dtype, head_dim, mask, softcap, arch_shared_memory_limit(arch))) {
      // The kernel reads a block mask with one CTA a tile only.
      if (attention.block_mask.data != nullptr) tma->cluster = tma->persistent = false;
      return *tma;
    }
  }
  return modifiers_forward_config(dtype, head_dim, mask, softcap, arch);
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
    ForwardConfig config{dtype, head_dim, tile.block_m, tile.block_n,       tile.warps,
                         1,     mask,     softcap,      tile.q_in_registers};
    if (!config.valid() || config.shared_bytes() > limit) continue;
    // A second K/V stage overlaps the next tile's loads with this tile's math.
    ForwardConfig pipelined = config;
    pipelined.stages = 2;
    return pipelined.valid() && pipelined.shared_bytes() <= limit ? pipelined : config;
  }
  // Unreachable with today's tables (the last preference fits 99 KB); kept so that the result
  // stays valid if the space changes: the config with the least shared memory.
  std::vector<ForwardConfig> configs = forward_configs(dtype, head_dim, mask, softcap);
  std::erase_if(configs, [](const ForwardConfig& c) { return c.path != ForwardPath::mma_sync; });
  return least_shared_memory(configs);
}

ForwardConfig wide_forward_config(DType dtype, int head_dim, int head_dim_v, MaskKind mask,
                                  bool softcap, bool values_in_keys, const std::string& arch,
                                  std::int64_t rows) {
  if (!dtype_supported(dtype)) {
    throw InvalidArgument("dtype",
                          "is " + std::string(dtype_name(dtype)) + "; supported: f16, bf16");
  }
  const int limit = arch_shared_memory_limit(arch);
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
          config.path = ForwardPath::wide;
          config.head_dim_v = head_dim_v;
          config.column_groups = groups;
          config.values_in_keys = in_keys;
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

ForwardConfig default_forward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                     const std::string& arch) {
  return default_config(dtype, head_dim, mask, softcap, arch, /*allow_tma=*/true);
}

ForwardConfig fallback_forward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                      const std::string& arch) {
  return default_config(dtype, head_dim, mask, softcap, arch, /*allow_tma=*/false);
}

namespace {

/// Throws InvalidArgument("config") unless `config` is in the space, runs on `arch` and takes
/// `modifiers`.
void check_forward_spec(const ForwardConfig& config, const std::string& arch,
                        const ScoreModifiers& modifiers) {
  if (!config.valid()) {
    throw InvalidArgument("config",
                          "is not in the forward config space (see "
                          "attention_forward_space::config_valid)");
  }
  if (!runs_on(config, arch)) {
    throw InvalidArgument("config",
                          "is a Hopper path (wgmma, TMA), which runs on sm_90a only, not " + arch);
  }
  if (!modifiers.empty() &&
      (config.path == ForwardPath::wgmma || config.path == ForwardPath::wide)) {
    throw InvalidArgument("config", std::string("is the ") +
                                        (config.path == ForwardPath::wide ? "wide" : "wgmma") +
                                        " path; score and mask modifiers run on the mma.sync "
                                        "and the TMA paths");
  }
}

/// The kernel's readable name's parts after the head dim ("bf16", "window", "br128", ...).
std::vector<std::string> forward_name_traits(const ForwardConfig& config,
                                             const ScoreModifiers& modifiers) {
  std::vector<std::string> traits = {std::string(dtype_name(config.dtype))};
  const auto flag = [&traits](bool on, const char* name) {
    if (on) traits.emplace_back(name);
  };
  flag(config.mask == MaskKind::window, "window");
  flag(config.softcap, "softcap");
  for (const std::string& tile :
       {detail::trait("br", config.block_m), detail::trait("bc", config.block_n),
        detail::trait("w", config.warps), detail::trait("s", config.stages)}) {
    traits.push_back(tile);
  }
  flag(config.q_in_registers, "qreg");
  if (config.path == ForwardPath::wide) {
    traits.emplace_back("wide");
    traits.push_back(detail::trait("hdv", config.head_dim_v));
    traits.push_back(detail::trait("g", config.column_groups));
    flag(config.values_in_keys, "vk");
  }
  flag(config.path == ForwardPath::wgmma, "wgmma");
  flag(config.path == ForwardPath::tma, "tma");
  flag(config.overlap, "overlap");
  flag(config.pingpong, "pingpong");
  flag(config.p_in_shared, "pshared");
  flag(config.persistent, "persistent");
  flag(config.cluster, "cluster2");
  flag(config.varlen, "varlen");
  flag(config.paged, "paged");
  flag(config.pack_gqa, "packgqa");
  flag(config.split, "split");
  flag(config.kv_e4m3, "kv_e4m3");
  if (!modifiers.empty()) traits.push_back("mod" + modifiers.digest().substr(0, 8));
  return traits;
}

}  // namespace

ForwardKernel forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers) {
  switch (config.path) {
    case ForwardPath::wide:
      return wide_forward_kernel(config);
    case ForwardPath::wgmma:
      return wgmma_forward_kernel(config);
    case ForwardPath::tma:
      return tma_forward_kernel(config, modifiers);
    case ForwardPath::mma_sync:
      break;
  }
  return fa2_forward_kernel(config, modifiers);
}

detail::KernelSpec forward_spec(const ForwardConfig& config, const std::string& arch,
                                const ScoreModifiers& modifiers) {
  check_forward_spec(config, arch, modifiers);
  const ForwardKernel kernel = forward_kernel(config, modifiers);
  detail::KernelSpec spec;
  spec.op = "attention-forward";
  spec.header = kernel.header;
  spec.name_expression = kernel.name_expression();
  // The modifiers' struct is defined before the kernel's header (the TMA form always asks, so
  // an empty one is an empty prelude).
  if (config.path == ForwardPath::tma || !modifiers.empty()) spec.prelude = modifiers.definition();
  spec.arch = arch;
  spec.role = "forward";
  spec.head_dim = config.head_dim;
  spec.traits = forward_name_traits(config, modifiers);
  spec.readable_name = detail::name_of("attention_forward", spec.head_dim, spec.traits);
  spec.threads = config.warps * 32;
  spec.dynamic_shared_bytes = config.shared_bytes();
  return spec;
}

namespace {

struct SpecKey {
  ForwardConfig config;
  std::string arch;
  ScoreModifiers modifiers;
  bool operator==(const SpecKey&) const = default;
};

struct SpecKeyHash {
  std::size_t operator()(const SpecKey& key) const noexcept {
    const ForwardConfig& c = key.config;
    const std::uint64_t tiles =
        static_cast<std::uint64_t>(c.head_dim) << 48 ^ static_cast<std::uint64_t>(c.block_m) << 32 ^
        static_cast<std::uint64_t>(c.block_n) << 16 ^ static_cast<std::uint64_t>(c.warps) << 8 ^
        static_cast<std::uint64_t>(c.stages);
    const unsigned flags = static_cast<unsigned>(c.dtype) | static_cast<unsigned>(c.mask) << 4 |
                           static_cast<unsigned>(c.path) << 8 | c.softcap << 12 |
                           c.q_in_registers << 13 | c.overlap << 14 | c.pingpong << 15 |
                           c.p_in_shared << 16 | c.persistent << 17 | c.varlen << 18 |
                           c.paged << 19 | c.pack_gqa << 20 | c.split << 21 | c.cluster << 22;
    return std::hash<std::uint64_t>{}(tiles) ^ std::hash<unsigned>{}(flags)*31u ^
           std::hash<std::string>{}(key.arch) ^ std::hash<std::string>{}(key.modifiers.score) ^
           std::hash<std::string>{}(key.modifiers.mask) * 7u;
  }
};

}  // namespace

const detail::KernelSpec& launch_forward_spec(const ForwardConfig& config, const std::string& arch,
                                              const ScoreModifiers& modifiers) {
  static std::mutex mutex;
  static std::unordered_map<SpecKey, detail::KernelSpec, SpecKeyHash> specs;
  SpecKey key{config, arch, modifiers};
  std::lock_guard lock(mutex);
  auto found = specs.find(key);
  if (found == specs.end()) {
    // Node-based: the reference handed out outlives later insertions.
    found = specs.emplace(std::move(key), forward_spec(config, arch, modifiers)).first;
  }
  return found->second;
}

double visible_pairs(const Attention& attention) {
  const VisibleWindow window = visible_window(attention);
  struct MaskFields {  // what KeyWindow reads of the kernels' params
    int seqlen_q, seqlen_k, window_left, window_right;
  };
  const MaskFields mask{static_cast<int>(attention.seqlen_q), static_cast<int>(attention.seqlen_k),
                        kernel_window(window.left), kernel_window(window.right)};
  const KeyWindow<MaskKind::window> keys(mask);
  double pairs = 0;
  for (int row = 0; row < mask.seqlen_q; ++row) {
    pairs += static_cast<double>(std::max(0, keys.hi(row) - keys.lo(row)));
  }
  return pairs;
}

bool forward_is_empty(const Attention& attention) {
  return attention.batch == 0 || attention.seqlen_q == 0;
}

MaskKind forward_mask_kind(const Attention& attention) {
  const VisibleWindow window = visible_window(attention);
  return window.left < 0 && window.right < 0 ? MaskKind::none : MaskKind::window;
}

ScoreScales forward_score_scales(const Attention& attention) {
  const double scale = softmax_scale(attention);
  const double softcap = attention.softcap;
  if (softcap <= 0.0) return {static_cast<float>(scale * std::numbers::log2e), 0.0f};
  // c · tanh(s / c) in base 2: the kernel computes tanh((q·k) · scale / c) · c · log2(e).
  return {static_cast<float>(scale / softcap), static_cast<float>(softcap * std::numbers::log2e)};
}

AttentionForwardParams forward_params(const Attention& attention, const TensorView& q,
                                      const TensorView& k, const TensorView& v, const TensorView& o,
                                      const TensorView& lse) {
  const VisibleWindow window = visible_window(attention);
  const ScoreScales scales = forward_score_scales(attention);
  AttentionForwardParams params{};
  params.q = head_tensor(q);
  params.k = head_tensor(k);
  params.v = head_tensor(v);
  params.o = head_tensor(o);
  params.lse = static_cast<float*>(lse.data);
  params.lse_batch_stride = lse.data != nullptr ? lse.strides[0] : 0;
  params.lse_head_stride = lse.data != nullptr ? lse.strides[1] : 0;
  params.seqlen_q = static_cast<int>(attention.seqlen_q);
  params.seqlen_k = static_cast<int>(attention.seqlen_k);
  params.head_dim = static_cast<int>(attention.head_dim);
  params.head_dim_v = static_cast<int>(attention.value_head_dim());
  params.heads_per_kv = static_cast<int>(attention.heads_q / attention.heads_kv);
  params.heads_q = static_cast<int>(attention.heads_q);
  params.batch = static_cast<int>(attention.batch);
  params.window_left = kernel_window(window.left);
  params.window_right = kernel_window(window.right);
  params.score_scale = scales.score_scale;
  params.softcap_log2 = scales.softcap_log2;
  params.block_mask = block_mask_view(attention);
  params.captures = capture_table(attention);
  return params;
}

detail::LaunchShape forward_launch_shape(const ForwardConfig& config, const Attention& attention,
                                         Stream stream) {
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((attention.seqlen_q + config.block_m - 1) / config.block_m);
  shape.grid_y = static_cast<unsigned>(attention.heads_q);
  shape.grid_z = static_cast<unsigned>(attention.batch);
  shape.block_x = static_cast<unsigned>(config.warps * 32);
  shape.dynamic_shared_bytes = static_cast<std::size_t>(config.shared_bytes());
  shape.stream = static_cast<CUstream>(stream);
  return shape;
}

void check_forward_config(const ForwardConfig& config, const Attention& attention,
                          const TensorView& q, const TensorView& k, const TensorView& v,
                          const TensorView& o) {
  if (!config.valid()) throw InvalidArgument("config", "is not in the forward config space");
  check_config_class({config.dtype, config.head_dim, config.mask, config.softcap}, attention, q);
  if (config.path != ForwardPath::tma) return;
  const std::string problem = tma_tensor_problem(attention, q, k, v, o);
  if (!problem.empty()) {
    throw InvalidArgument("config", "is the TMA path, which cannot read these tensors (" + problem +
                                        "); choose a config of another path");
  }
}

void attention_forward(detail::RuntimeBackend& backend, const Attention& attention,
                       const TensorView& q, const TensorView& k, const TensorView& v,
                       const TensorView& o, const TensorView& lse, const ForwardConfig& config,
                       Stream stream) {
  validate_forward_arguments(attention, q, k, v, o, lse);
  check_forward_config(config, attention, q, k, v, o);
  check_config_fits_device(config.shared_bytes(), backend.info());
  if (forward_is_empty(attention)) return;
  launch_planned_forward(backend.executor(), forward_launch(backend.info(), attention, q, k, v, o,
                                                            lse, config, stream));
}

std::optional<ForwardLaunch> plan_attention_forward(const DeviceInfo& device, ConfigChoice& choice,
                                                    const Attention& attention, const TensorView& q,
                                                    const TensorView& k, const TensorView& v,
                                                    const TensorView& o, const TensorView& lse,
                                                    Stream stream) {
  validate_forward_arguments(attention, q, k, v, o, lse);
  if (forward_is_empty(attention)) return std::nullopt;
  // With modifiers, the problem's key has their digest and its default is
  // dense_modifiers_forward_config; with a block mask, its default and every config it may take
  // from the database run one CTA a tile (AttentionProblem::cannot_run), the TMA form that
  // reads the mask.
  const AttentionProblem problem(false, q.dtype, attention);
  ForwardConfig config = choice.choose_as<ForwardConfig>(problem);
  // A cluster pairs query blocks; with an odd number of them one CTA of each (head, batch) would
  // only load: the unclustered twin runs instead (FlashAttention-3 clusters even counts only).
  if (config.cluster && (attention.seqlen_q + config.block_m - 1) / config.block_m % 2 != 0) {
    config.cluster = false;
  }
  ForwardLaunch launch = forward_launch(device, attention, q, k, v, o, lse, config, stream);
  if (!launch.maps.empty() && !tma_maps_problem(launch.maps).empty()) {
    // Tensors TMA cannot read: the best config of the other paths (its kernel name says so).
    const ForwardConfig other =
        problem.modified() ? modifiers_forward_config(q.dtype, attention, device.arch())
                           : fallback_forward_config(config.dtype, config.head_dim, config.mask,
                                                     config.softcap, device.arch());
    launch = forward_launch(device, attention, q, k, v, o, lse, other, stream);
  }
  return launch;
}

void launch_planned_forward(detail::Executor& executor, const ForwardLaunch& launch) {
  if (launch.maps.empty()) {
    detail::launch_kernel(executor, *launch.spec, launch.shape, launch.buffers, launch.params);
    return;
  }
  const detail::TensorMapParameter maps = executor.tensor_maps(launch.maps);
  detail::launch_kernel(executor, *launch.spec, launch.shape, launch.buffers, launch.params, maps);
}

void run_attention_forward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                           const Attention& attention, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView& o, const TensorView& lse,
                           Stream stream) {
  const std::optional<ForwardLaunch> launch =
      plan_attention_forward(backend.info(), choice, attention, q, k, v, o, lse, stream);
  if (launch) launch_planned_forward(backend.executor(), *launch);
}

}  // namespace flashjit::kernels
