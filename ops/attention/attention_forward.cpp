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
#include "attention/forward_families.hpp"
#include "attention/hopper/attention_forward_tma.hpp"
#include "attention/hopper/tma_forward_space.cuh"
#include "attention/hopper/wgmma_forward_space.cuh"
#include "attention/modifiers/attention_captures.hpp"
#include "attention/modifiers/automatic_block_mask.hpp"
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
  for (const NamedDescale& descale : fp8_descales(attention)) {
    if (descale.view->data != nullptr) {
      launch.buffers.push_back(kernel_buffer(*descale.view, descale.name));
    }
  }
  add_capture_buffers(attention, launch.buffers);
  if (config.path() == ForwardPath::tma) add_tma_forward_launch(launch, config, attention, device);
  if (config.fp8_tma()) add_fp8_tma_forward_launch(launch, config, attention);
  return launch;
}

}  // namespace

bool ForwardConfig::valid() const {
  if (path() == ForwardPath::fp8) return fp8_forward_config_valid(*this);  // e4m3 there only
  if (!dtype_supported(dtype)) return false;
  // (No path carries another's options: PathOptions holds the path's own alone.)
  if (path() == ForwardPath::wide) return wide_forward_config_valid(*this);
  if (path() == ForwardPath::decode) return decode_forward_config_valid(*this);
  if (!tma_forward_cluster_valid(block_n, cluster_blocks(), mask != MaskKind::none, persistent(),
                                 inference_layout())) {
    return false;
  }
  if (persistent() && !overlap()) return false;
  // The TMA path takes packed sequences (varlen, one CTA per tile); the other layouts and the
  // wgmma path take none.
  const bool tma_varlen =
      path() == ForwardPath::tma && varlen && !persistent() && !paged && !pack_gqa && !split;
  if (path() != ForwardPath::mma_sync && inference_layout() && !tma_varlen) return false;
  if (paged && !varlen) return false;  // a paged cache has per-sequence key counts
  // An fp8 cache: with per-sequence lengths, in 16-byte chunks of 16 elements, through the
  // mma.sync pipeline's two-stage staging ring or the TMA forward's packed kernel.
  if (kv_e4m3 && (!varlen || head_dim % 16 != 0 ||
                  (path() == ForwardPath::mma_sync ? stages != 2 : !tma_varlen))) {
    return false;
  }
  switch (path()) {
    case ForwardPath::wgmma:
      return wgmma_forward_config_valid(head_dim, block_m, block_n, warps, stages);
    case ForwardPath::tma:
      return tma_forward_config_valid(head_dim, block_m, block_n, warps, stages, p_in_shared(),
                                      kv_e4m3) &&
             tma_forward_schedule_valid(block_m, stages, overlap(), pingpong());
    case ForwardPath::wide:  // (above)
    case ForwardPath::decode:
    case ForwardPath::fp8:
    case ForwardPath::mma_sync:
      break;
  }
  return space::config_valid(head_dim, block_m, block_n, warps, stages, q_in_registers());
}

int ForwardConfig::shared_bytes() const {
  switch (path()) {
    case ForwardPath::wide:
      return warpgroups() ? wide::wgmma_shared_bytes(head_dim)
                          : wide::shared_bytes(head_dim, block_m, block_n, column_groups(), stages,
                                               values_in_keys());
    case ForwardPath::wgmma:
      return wgmma_forward_shared_bytes(head_dim, block_m, block_n);
    case ForwardPath::tma:
      return tma_forward_shared_bytes(head_dim, block_m, block_n, stages, p_in_shared(), kv_e4m3,
                                      tma_forward_q_slots(head_dim, block_m, block_n, stages,
                                                          p_in_shared(), kv_e4m3, persistent()));
    case ForwardPath::decode:
      return decode_forward_shared_bytes(*this);
    case ForwardPath::fp8:
      return fp8_forward_shared_bytes(*this);
    case ForwardPath::mma_sync:
      break;
  }
  return space::shared_bytes(head_dim, block_m, block_n, stages);
}

bool runs_wgmma(const std::string& arch) { return arch == "sm_90a"; }

bool runs_fp8_mma(const std::string& arch) {
  detail::validate_arch(arch);
  return std::stoi(arch.substr(3)) >= 89;  // "sm_89" -> 89
}

bool runs_on(const ForwardConfig& config, const std::string& arch) {
  if (config.path() == ForwardPath::fp8) {
    return config.fp8_tma() ? runs_wgmma(arch) : runs_fp8_mma(arch);
  }
  return config.path() == ForwardPath::mma_sync ||
         (config.path() == ForwardPath::wide && !config.warpgroups()) ||
         config.path() == ForwardPath::decode || runs_wgmma(arch);
}

std::vector<ForwardConfig> forward_configs(DType dtype, int head_dim, MaskKind mask, bool softcap) {
  if (dtype == DType::e4m3) return fp8_forward_configs(head_dim, mask, softcap);
  std::vector<ForwardConfig> configs = fa2_forward_configs(dtype, head_dim, mask, softcap);
  for (ForwardConfig& config : hopper_forward_configs(dtype, head_dim, mask, softcap)) {
    configs.push_back(config);
  }
  return configs;
}

namespace {

ForwardConfig default_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                             const std::string& arch, bool allow_tma) {
  if (dtype == DType::e4m3) return fp8_forward_config(head_dim, mask, softcap, arch, allow_tma);
  check_attention_support(dtype, head_dim);
  const int limit = arch_shared_memory_limit(arch);
  if (runs_wgmma(arch)) {
    // The Hopper paths where they take the problem; neither is timed on a GPU yet against the
    // mma.sync path. First FlashAttention-3's structure (TMA), then the wgmma kernel with
    // cp.async loads: Br 128 (two warpgroups) by Bc 128 at head dims 64 and 128.
    if (allow_tma) {
      if (auto tma = tma_default_config(dtype, head_dim, mask, softcap, limit)) return *tma;
    }
    ForwardConfig hopper{dtype, head_dim, 128, 128, 8, 1, mask, softcap};
    hopper.options = WgmmaOptions{};
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
  if (runs_wgmma(arch) && attention.dropout_p <= 0.0f) {  // the TMA forward has no dropout
    check_attention_support(dtype, head_dim);
    if (auto tma =
            tma_default_config(dtype, head_dim, mask, softcap, arch_shared_memory_limit(arch))) {
      // The kernel reads a block mask with one CTA a tile only.
      if (attention.block_mask.data != nullptr) tma->tma().cluster = tma->tma().persistent = false;
      return *tma;
    }
  }
  return modifiers_forward_config(dtype, head_dim, mask, softcap, arch);
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
  if (config.path() == ForwardPath::fp8 && !runs_on(config, arch)) {
    throw InvalidArgument(
        "config", std::string(config.fp8_tma() ? "is the fp8 forward's TMA form, which runs "
                                                 "on sm_90a only, not "
                                               : "is the fp8 forward, which needs fp8 tensor "
                                                 "cores (sm_89 or later), not ") +
                      arch);
  }
  if (!runs_on(config, arch)) {
    throw InvalidArgument("config", "is a Hopper config (wgmma, TMA, the wide path's wgmma form), "
                                    "which runs on sm_90a only, not " + arch);
  }
  if (!modifiers.empty() &&
      (config.path() == ForwardPath::wgmma || config.path() == ForwardPath::wide ||
       config.path() == ForwardPath::fp8)) {
    const char* path = config.path() == ForwardPath::wide  ? "wide"
                       : config.path() == ForwardPath::fp8 ? "fp8"
                                                           : "wgmma";
    throw InvalidArgument("config", std::string("is the ") + path +
                                        " path; score and mask modifiers run on the mma.sync, "
                                        "the TMA and the decode paths");
  }
  if (modifiers.dropout && config.path() != ForwardPath::mma_sync) {
    throw InvalidArgument("config", "is not an mma.sync config; dropout runs on the mma.sync "
                                    "kernels (attention/fa2/) only");
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
  flag(config.q_in_registers(), "qreg");
  if (config.path() == ForwardPath::wide) {
    traits.emplace_back("wide");
    traits.push_back(detail::trait("hdv", config.head_dim_v()));
    traits.push_back(detail::trait("g", config.column_groups()));
    flag(config.values_in_keys(), "vk");
    flag(config.warpgroups(), "wgmma");
  }
  flag(config.path() == ForwardPath::decode, "decode");
  flag(config.path() == ForwardPath::wgmma, "wgmma");
  flag(config.path() == ForwardPath::tma || config.fp8_tma(), "tma");
  flag(config.overlap(), "overlap");
  flag(config.pingpong(), "pingpong");
  flag(config.p_in_shared(), "pshared");
  flag(config.persistent(), "persistent");
  flag(config.cluster(), "cluster2");
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
  switch (config.path()) {
    case ForwardPath::wide:
      return wide_forward_kernel(config);
    case ForwardPath::wgmma:
      return wgmma_forward_kernel(config);
    case ForwardPath::tma:
      return tma_forward_kernel(config, modifiers);
    case ForwardPath::decode:
      return decode_forward_kernel(config, modifiers);
    case ForwardPath::fp8:
      return fp8_forward_kernel(config);
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
  if (config.path() == ForwardPath::tma || !modifiers.empty())
    spec.prelude = modifiers.definition();
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
    const unsigned flags =
        static_cast<unsigned>(c.dtype) | static_cast<unsigned>(c.mask) << 4 |
        static_cast<unsigned>(c.path()) << 8 | c.softcap << 12 | c.q_in_registers() << 13 |
        c.overlap() << 14 | c.pingpong() << 15 | c.p_in_shared() << 16 | c.persistent() << 17 |
        c.varlen << 18 | c.paged << 19 | c.pack_gqa << 20 | c.split << 21 | c.cluster() << 22 |
        c.values_in_keys() << 23 | c.kv_e4m3 << 24 | c.warpgroups() << 25 | c.fp8_tma() << 26;
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
  params.dropout = dropout_params(attention);
  params.sequences.q_descale = cache_descale(attention.q_descale);  // the fp8 forward's
  params.sequences.k_descale = cache_descale(attention.k_descale);
  params.sequences.v_descale = cache_descale(attention.v_descale);
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
  if (config.path() != ForwardPath::tma && !config.fp8_tma()) return;
  // The maps the launch would describe (the fp8 form's hold Q and K as pairs of codes).
  const std::string problem =
      config.fp8_tma()
          ? tma_maps_problem(fp8_forward_tma_maps(forward_params(attention, q, k, v, o, {}),
                                                  attention, config.block_m, config.block_n))
          : tma_tensor_problem(attention, q, k, v, o);
  if (!problem.empty()) {
    throw InvalidArgument("config", std::string("is the ") +
                                        (config.fp8_tma() ? "fp8 forward's TMA form" : "TMA path") +
                                        ", which cannot read these tensors (" + problem +
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
  launch_planned_forward(
      backend, forward_launch(backend.info(), attention, q, k, v, o, lse, config, stream));
}

ForwardConfig launched_forward_config(const Attention& attention, ForwardConfig config) {
  // A cluster pairs query blocks; with an odd number of them one CTA of each (head, batch) would
  // only load: the unclustered twin runs instead (FlashAttention-3 clusters even counts only).
  if (config.cluster() && (attention.seqlen_q + config.block_m - 1) / config.block_m % 2 != 0) {
    config.tma().cluster = false;
  }
  return config;
}

std::optional<ForwardLaunch> plan_attention_forward(const DeviceInfo& device, ConfigChoice& choice,
                                                    const Attention& attention, const TensorView& q,
                                                    const TensorView& k, const TensorView& v,
                                                    const TensorView& o, const TensorView& lse,
                                                    Stream stream) {
  validate_forward_arguments(attention, q, k, v, o, lse);
  if (q.dtype == DType::e4m3 && !runs_fp8_mma(device.arch())) {
    throw InvalidArgument("q.dtype",
                          "is e4m3: the fp8 forward needs fp8 tensor cores (sm_89 or "
                          "later); this device is " +
                              device.arch());
  }
  if (forward_is_empty(attention)) return std::nullopt;
  // With modifiers, the problem's key has their digest and its default is
  // dense_modifiers_forward_config; with a block mask, its default and every config it may take
  // from the database run one CTA a tile (AttentionProblem::cannot_run), the TMA form that
  // reads the mask.
  const AttentionProblem problem(false, q.dtype, attention);
  const ForwardConfig config =
      launched_forward_config(attention, choice.choose_as<ForwardConfig>(problem));
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

void launch_planned_forward(detail::RuntimeBackend& backend, ForwardLaunch launch) {
  detail::Executor& executor = backend.executor();
  if (launch.takes_tiles) {
    // Left zero by each launch that takes from it, so launches in one stream share it.
    int* const counter = backend.zeroed_counters(1, static_cast<Stream>(launch.shape.stream));
    launch.params.tile_counter = counter;
    launch.buffers.push_back({counter, sizeof(int), "tile_counter"});
  }
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
  validate_forward_arguments(attention, q, k, v, o, lse);  // before a block mask is built
  const Attention run = forward_is_empty(attention)
                            ? attention
                            : with_automatic_block_mask(backend, attention, stream);
  std::optional<ForwardLaunch> launch =
      plan_attention_forward(backend.info(), choice, run, q, k, v, o, lse, stream);
  if (launch) launch_planned_forward(backend, std::move(*launch));
}

}  // namespace flashjit::kernels
