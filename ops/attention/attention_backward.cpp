#include "attention/attention_backward.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_calls.hpp"
#include "attention/attention_common.hpp"
#include "attention/attention_tuning.hpp"
#include "attention/backward_families.hpp"
#include "attention/hopper/attention_forward_tma.hpp"
#include "attention/hopper/tma_backward_space.cuh"
#include "attention/modifiers/attention_captures.hpp"
#include "attention/modifiers/automatic_block_mask.hpp"
#include "attention/parts/row_stats.cuh"
#include "flashjit/error.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace space = flashjit::attention_backward_space;

namespace {

/// The traits of a main kernel's readable name: the config's dtype, mask and softcap, then the
/// kernel's tile.
std::vector<std::string> tile_traits(const BackwardConfig& config, int block_m, int block_n,
                                     int warps) {
  std::vector<std::string> traits = {std::string(dtype_name(config.dtype))};
  if (config.mask == MaskKind::window) traits.push_back("window");
  if (config.softcap) traits.push_back("softcap");
  for (const std::string& tile :
       {detail::trait("br", block_m), detail::trait("bc", block_n), detail::trait("w", warps)}) {
    traits.push_back(tile);
  }
  return traits;
}

/// A spec of op "attention-backward" for `arch` with the fields every backward kernel shares.
detail::KernelSpec backward_spec(const std::string& arch, const std::string& role,
                                 const std::string& header, const std::string& name_expression,
                                 int head_dim, std::vector<std::string> traits) {
  detail::KernelSpec spec;
  spec.op = "attention-backward";
  spec.header = header;
  spec.name_expression = name_expression;
  spec.arch = arch;
  spec.role = role;
  spec.head_dim = head_dim;
  spec.traits = std::move(traits);
  spec.readable_name = detail::name_of("attention_backward." + role, head_dim, spec.traits);
  return spec;
}

/// The dK/dV kernel's spec: the mma.sync kernel's, or with BackwardConfig::tma the Hopper one's.
detail::KernelSpec dkdv_spec(const BackwardConfig& config, const std::string& arch,
                             const ScoreModifiers& modifiers) {
  const KeyBlockTile& t = config.key;
  std::vector<std::string> traits = tile_traits(config, t.block_m, t.block_n, t.warps);
  traits.push_back(detail::trait("s", t.stages));
  if (config.tma) {
    traits.push_back("tma");
    if (config.deterministic) traits.push_back("deterministic");
  } else if (!config.deterministic) {
    traits.push_back("atomic_dq");
  }
  if (config.varlen) traits.push_back("varlen");
  if (!modifiers.empty()) traits.push_back("mod" + modifiers.digest().substr(0, 8));
  const BackwardKernel kernel =
      config.tma ? tma_dkdv_kernel(config, modifiers) : fa2_dkdv_kernel(config, modifiers);
  detail::KernelSpec spec = backward_spec(arch, "dkdv", kernel.header, kernel.name_expression(),
                                          config.head_dim, std::move(traits));
  // The modifiers' struct is defined before the kernel's header (the TMA form always asks, so
  // an empty one is an empty prelude).
  if (config.tma || !modifiers.empty()) spec.prelude = modifiers.definition();
  spec.threads = t.warps * 32;
  spec.dynamic_shared_bytes = config.key_shared_bytes();
  return spec;
}

detail::KernelSpec dq_spec(const BackwardConfig& config, const std::string& arch,
                           const ScoreModifiers& modifiers) {
  const QueryBlockTile& t = config.query;
  std::vector<std::string> traits = tile_traits(config, t.block_m, t.block_n, t.warps);
  if (config.varlen) traits.push_back("varlen");
  if (!modifiers.empty()) traits.push_back("mod" + modifiers.digest().substr(0, 8));
  const BackwardKernel kernel = fa2_dq_kernel(config, modifiers);
  detail::KernelSpec spec = backward_spec(arch, "dq", kernel.header, kernel.name_expression(),
                                          config.head_dim, std::move(traits));
  if (!modifiers.empty()) spec.prelude = modifiers.definition();
  spec.threads = t.warps * 32;
  spec.dynamic_shared_bytes = config.query_shared_bytes();
  return spec;
}

/// Blocks of the TMA backward's row statistics for `attention`'s queries: batch · seqlen_q rows
/// bound a packed batch's too (seqlen_q is its longest sequence's).
std::int64_t backward_row_stat_blocks(const Attention& attention) {
  return row_stats_blocks(attention.batch * attention.seqlen_q, attention.batch, attention.heads_q);
}

/// A per-row kernel templated on the element type (and whether the batch has variable lengths,
/// and for the dQ-convert kernel whether dQ's sums are permuted) only: the delta and dQ-convert
/// kernels.
detail::KernelSpec row_kernel_spec(DType dtype, bool varlen, const std::string& arch,
                                   const std::string& role, const std::string& kernel,
                                   bool permuted = false) {
  std::vector<std::string> traits = {std::string(dtype_name(dtype))};
  if (varlen) traits.push_back("varlen");
  if (permuted) traits.push_back("permuted");
  const BackwardKernel row = fa2_row_kernel(kernel, dtype, varlen, permuted);
  detail::KernelSpec spec =
      backward_spec(arch, role, row.header, row.name_expression(), 0, std::move(traits));
  spec.threads = kDeltaRowsPerBlock * 32;  // one warp per row
  return spec;
}

/// Grid (ceil(rows / rows_per_block), heads, batch) of `warps` warps.
detail::LaunchShape launch_shape(std::int64_t rows, int rows_per_block, std::int64_t heads,
                                 std::int64_t batch, int warps, int shared_bytes, Stream stream) {
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  shape.grid_y = static_cast<unsigned>(heads);
  shape.grid_z = static_cast<unsigned>(batch);
  shape.block_x = static_cast<unsigned>(warps * 32);
  shape.dynamic_shared_bytes = static_cast<std::size_t>(shared_bytes);
  shape.stream = static_cast<CUstream>(stream);
  return shape;
}

/// The tensors of one call, bundled for the launch helpers.
struct BackwardTensors {
  const TensorView& q;
  const TensorView& k;
  const TensorView& v;
  const TensorView& o;
  const TensorView& lse;
  const TensorView& dout;
  const TensorView& dq;
  const TensorView& dk;
  const TensorView& dv;
};

/// The call's tensors and workspaces as the launches name them; `delta` is D, or with a TMA
/// config the row statistics (named so).
std::vector<detail::KernelBuffer> backward_buffers(const BackwardTensors& t,
                                                   const DeviceBuffer& delta, bool row_stats,
                                                   const DeviceBuffer& dq_accum,
                                                   const DeviceBuffer& dq_semaphore) {
  std::vector<detail::KernelBuffer> buffers = {
      kernel_buffer(t.q, "q"),     kernel_buffer(t.k, "k"),
      kernel_buffer(t.v, "v"),     kernel_buffer(t.o, "o"),
      kernel_buffer(t.lse, "lse"), kernel_buffer(t.dout, "dout"),
      kernel_buffer(t.dq, "dq"),   kernel_buffer(t.dk, "dk"),
      kernel_buffer(t.dv, "dv"),   {delta.data(), delta.size(), row_stats ? "row_stats" : "delta"}};
  if (dq_accum.size() > 0) buffers.push_back({dq_accum.data(), dq_accum.size(), "dq_accum"});
  if (dq_semaphore.size() > 0) {
    buffers.push_back({dq_semaphore.data(), dq_semaphore.size(), "dq_semaphore"});
  }
  return buffers;
}

/// Launches a validated call with a config already checked against it: D, then dK and dV (and
/// dQ's sum), then dQ, all on `stream`. The workspaces (D: 4 bytes per query row and head, or
/// the TMA backward's row statistics, read by TMA through one more map; dQ's
/// sum: 4 per element of dQ unless the dQ kernel computes it; the turn counters of the
/// deterministic TMA backward) are allocated and freed in the stream's order, so nothing waits
/// on the host, and a launch that throws halfway still frees them after the kernels already
/// queued.
/// `tma_maps`: the TMA backward's tensor maps (tma_backward_maps), for a TMA config only.
void launch_backward(detail::RuntimeBackend& backend, const Attention& attention,
                     const BackwardTensors& t, const BackwardConfig& config, Stream stream,
                     const std::vector<emulator::TensorMap>& tma_maps = {},
                     const SequenceIndex& sequences = {},
                     const std::vector<detail::KernelBuffer>& index_buffers = {}) {
  const BackwardSpecs specs =
      backward_specs(config, backend.info().arch(), score_modifiers(attention));
  const BackwardLaunchShapes shapes = backward_launch_shapes(config, attention, stream);
  const DeviceBuffer delta = backend.allocate_buffer_on_stream(
      config.tma ? backward_row_stats_bytes(attention) : backward_delta_bytes(attention), stream);
  const DeviceBuffer dq_accum =
      backend.allocate_buffer_on_stream(backward_dq_accum_bytes(attention, config), stream);
  const DeviceBuffer dq_semaphore =
      backend.allocate_buffer_on_stream(backward_dq_semaphore_bytes(attention, config), stream);
  AttentionBackwardParams params =
      backward_params(attention, t.q, t.k, t.v, t.o, t.lse, t.dout, t.dq, t.dk, t.dv,
                      static_cast<float*>(delta.data()),
                      dq_accum.size() > 0 ? static_cast<float*>(dq_accum.data()) : nullptr);
  params.dq_semaphore = dq_semaphore.size() > 0 ? static_cast<int*>(dq_semaphore.data()) : nullptr;
  params.sequences = sequences;  // a variable-length batch's offsets (zero for a dense one)
  std::vector<emulator::TensorMap> maps = tma_maps;
  if (config.tma) {  // D beside each row's LSE, brought in by TMA with Q and dO
    params.row_stats = params.delta;
    params.delta = nullptr;
    maps.push_back(row_stats_tma_map(params.row_stats, backward_row_stat_blocks(attention)));
  }
  std::vector<detail::KernelBuffer> buffers =
      backward_buffers(t, delta, config.tma, dq_accum, dq_semaphore);
  buffers.insert(buffers.end(), index_buffers.begin(), index_buffers.end());
  add_capture_buffers(attention, buffers);
  if (attention.block_mask.data != nullptr) {
    buffers.push_back(kernel_buffer(attention.block_mask, "block_mask"));
  }
  detail::Executor& executor = backend.executor();
  executor.prepare(specs.in_order());  // a cold call compiles its three kernels at once
  detail::launch_kernel(executor, specs.delta, shapes.delta, buffers, params);  // D
  if (config.tma) {
    const detail::TensorMapParameter map_parameter = executor.tensor_maps(maps);
    detail::launch_kernel(executor, specs.dkdv, shapes.dkdv, buffers, params,
                          map_parameter);  // dK, dV
  } else {
    detail::launch_kernel(executor, specs.dkdv, shapes.dkdv, buffers, params);  // dK, dV
  }
  detail::launch_kernel(executor, specs.dq, shapes.dq, buffers, params);  // dQ
}

/// The TMA backward's maps for the call when `config` is a TMA one it can use (none otherwise);
/// when it cannot (tensors TMA cannot read), `config` becomes the call's mma.sync default (its
/// varlen flag kept).
std::vector<emulator::TensorMap> maps_or_fallback(BackwardConfig& config, const std::string& arch,
                                                  const BackwardTensors& t) {
  if (!config.tma) return {};
  TmaBackwardMaps tma = tma_backward_maps(arch, t.q, t.k, t.v, t.dout, config);
  if (tma.problem.empty()) return std::move(tma.maps);
  const bool varlen = config.varlen;
  config = fallback_backward_config(config.dtype, config.head_dim, config.mask, config.softcap,
                                    config.deterministic, arch);
  config.varlen = varlen;
  return {};
}

}  // namespace

bool BackwardConfig::valid() const {
  if (dtype != DType::f16 && dtype != DType::bf16) return false;
  return tma ? tma_backward_config_valid(*this) : fa2_backward_config_valid(*this);
}

int BackwardConfig::key_shared_bytes() const {
  if (tma) {
    return tma_backward_shared_bytes(head_dim, key.block_n, key.stages, shared_keys(), key.block_m);
  }
  return space::key_kernel_shared_bytes(head_dim, key.block_m, key.block_n, key.stages);
}

int BackwardConfig::query_shared_bytes() const {
  return has_query_kernel()
             ? space::query_kernel_shared_bytes(head_dim, query.block_m, query.block_n)
             : 0;
}

bool BackwardConfig::has_query_kernel() const { return deterministic && !tma; }

int BackwardConfig::shared_bytes() const {
  return std::max(key_shared_bytes(), query_shared_bytes());
}

std::vector<BackwardConfig> backward_configs(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                             bool deterministic) {
  std::vector<BackwardConfig> configs =
      fa2_backward_configs(dtype, head_dim, mask, softcap, deterministic);
  for (const BackwardConfig& config :
       tma_backward_configs(dtype, head_dim, mask, softcap, deterministic)) {
    configs.push_back(config);
  }
  return configs;
}

bool runs_on(const BackwardConfig& config, const std::string& arch) {
  return !config.tma || runs_wgmma(arch);
}

namespace {

/// default_backward_config, or for a call with modifiers (`modified`) the same with the shared
/// keys also at a padded head dim of 128 (each score's slope through score_mod kept as softcap's
/// is, which spills there with Bc = 128).
BackwardConfig backward_default(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                bool deterministic, const std::string& arch, bool modified) {
  check_attention_support(dtype, head_dim);
  if (runs_wgmma(arch)) {
    if (auto tma = tma_backward_default(dtype, head_dim, mask, softcap, deterministic, modified,
                                        arch_shared_memory_limit(arch))) {
      return *tma;
    }
  }
  return fallback_backward_config(dtype, head_dim, mask, softcap, deterministic, arch);
}

}  // namespace

BackwardConfig default_backward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                       bool deterministic, const std::string& arch) {
  return backward_default(dtype, head_dim, mask, softcap, deterministic, arch, false);
}

BackwardConfig fallback_backward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                        bool deterministic, const std::string& arch) {
  check_attention_support(dtype, head_dim);
  if (auto fa2 = fa2_backward_default(dtype, head_dim, mask, softcap, deterministic,
                                      arch_shared_memory_limit(arch))) {
    return *fa2;
  }
  // Kept so that the result stays valid if the tables change: the mma.sync config with the least
  // shared memory (it runs on every arch).
  return least_shared_memory(fa2_backward_configs(dtype, head_dim, mask, softcap, deterministic));
}

BackwardConfig modifiers_backward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                         bool deterministic, const std::string& arch) {
  return backward_default(dtype, head_dim, mask, softcap, deterministic, arch, true);
}

BackwardConfig modifiers_backward_config(DType dtype, const Attention& attention,
                                         const std::string& arch) {
  if (attention.dropout_p > 0.0f) {  // the mma.sync kernels: the Hopper backward has no dropout
    return fallback_backward_config(dtype, static_cast<int>(attention.head_dim),
                                    forward_mask_kind(attention), attention.softcap > 0.0f,
                                    attention.deterministic, arch);
  }
  return modifiers_backward_config(dtype, static_cast<int>(attention.head_dim),
                                   forward_mask_kind(attention), attention.softcap > 0.0f,
                                   attention.deterministic, arch);
}

BackwardSpecs backward_specs(const BackwardConfig& config, const std::string& arch,
                             const ScoreModifiers& modifiers) {
  if (!config.valid()) {
    throw InvalidArgument("config",
                          "is not in the backward config space (see "
                          "attention_backward_space::key_kernel_valid and query_kernel_valid)");
  }
  if (!runs_on(config, arch)) {
    throw InvalidArgument("config", "is the TMA backward, which runs on sm_90a only, not " + arch);
  }
  if (config.tma && modifiers.dropout) {
    throw InvalidArgument("config", "is the TMA backward; dropout runs on the mma.sync kernels");
  }
  BackwardSpecs specs;
  specs.delta = row_kernel_spec(config.dtype, config.varlen, arch, "delta", "delta_kernel");
  specs.dkdv = dkdv_spec(config, arch, modifiers);
  // The TMA backward adds dQ's sums in the permuted layout (dq_accum_layout.cuh).
  specs.dq = config.has_query_kernel()
                 ? dq_spec(config, arch, modifiers)
                 : row_kernel_spec(config.dtype, config.varlen, arch, "dq_convert",
                                   "dq_convert_kernel", config.tma);
  return specs;
}

void check_backward_config(const BackwardConfig& config, const Attention& attention,
                           const TensorView& q) {
  if (!config.valid()) throw InvalidArgument("config", "is not in the backward config space");
  check_config_class({config.dtype, config.head_dim, config.mask, config.softcap}, attention, q);
  if (config.deterministic != attention.deterministic) {
    throw InvalidArgument("config", std::string(config.deterministic ? "is" : "is not") +
                                        " deterministic but the call's attention.deterministic "
                                        "is " +
                                        (attention.deterministic ? "true" : "false"));
  }
}

bool backward_is_empty(const Attention& attention) {
  return attention.batch == 0 || (attention.seqlen_q == 0 && attention.seqlen_k == 0);
}

std::size_t backward_delta_bytes(const Attention& attention) {
  return static_cast<std::size_t>(attention.batch * attention.heads_q * attention.seqlen_q) *
         sizeof(float);
}

std::size_t backward_row_stats_bytes(const Attention& attention) {
  return static_cast<std::size_t>(backward_row_stat_blocks(attention)) * kRowStatFloats *
         sizeof(float);
}

std::size_t backward_dq_accum_bytes(const Attention& attention, const BackwardConfig& config) {
  if (config.has_query_kernel()) return 0;
  return backward_delta_bytes(attention) * static_cast<std::size_t>(attention.head_dim);
}

std::size_t backward_dq_semaphore_bytes(const Attention& attention, const BackwardConfig& config) {
  if (!config.tma || !config.deterministic) return 0;
  const std::int64_t blocks = (attention.seqlen_q + kDqSemaphoreRows - 1) / kDqSemaphoreRows;
  return static_cast<std::size_t>(attention.batch * attention.heads_q * blocks) * sizeof(int);
}

AttentionBackwardParams backward_params(const Attention& attention, const TensorView& q,
                                        const TensorView& k, const TensorView& v,
                                        const TensorView& o, const TensorView& lse,
                                        const TensorView& dout, const TensorView& dq,
                                        const TensorView& dk, const TensorView& dv, float* delta,
                                        float* dq_accum) {
  // The fields both passes have come from the forward's own filling, so they cannot drift.
  const AttentionForwardParams forward = forward_params(attention, q, k, v, o, lse);
  AttentionBackwardParams params{};
  params.q = forward.q;
  params.k = forward.k;
  params.v = forward.v;
  params.o = forward.o;
  params.dout = head_tensor(dout);
  params.dq = head_tensor(dq);
  params.dk = head_tensor(dk);
  params.dv = head_tensor(dv);
  params.lse = forward.lse;
  params.lse_batch_stride = forward.lse_batch_stride;
  params.lse_head_stride = forward.lse_head_stride;
  params.delta = delta;
  params.dq_accum = dq_accum;
  params.batch = static_cast<int>(attention.batch);
  params.heads_q = static_cast<int>(attention.heads_q);
  params.seqlen_q = forward.seqlen_q;
  params.seqlen_k = forward.seqlen_k;
  params.head_dim = forward.head_dim;
  params.head_dim_v = forward.head_dim_v;
  params.heads_per_kv = forward.heads_per_kv;
  params.window_left = forward.window_left;
  params.window_right = forward.window_right;
  params.score_scale = forward.score_scale;
  params.softcap_log2 = forward.softcap_log2;
  params.scale = static_cast<float>(softmax_scale(attention));
  params.captures = forward.captures;
  params.block_mask = forward.block_mask;
  params.dropout = forward.dropout;
  return params;
}

BackwardLaunchShapes backward_launch_shapes(const BackwardConfig& config,
                                            const Attention& attention, Stream stream) {
  const Attention& a = attention;
  constexpr int kRow = kDeltaRowsPerBlock;  // one warp per row
  const KeyBlockTile& key = config.key;
  const QueryBlockTile& query = config.query;
  return {launch_shape(a.seqlen_q, kRow, a.heads_q, a.batch, kRow, 0, stream),
          launch_shape(a.seqlen_k, key.block_n, a.heads_kv, a.batch, key.warps,
                       config.key_shared_bytes(), stream),
          config.has_query_kernel()
              ? launch_shape(a.seqlen_q, query.block_m, a.heads_q, a.batch, query.warps,
                             config.query_shared_bytes(), stream)
              : launch_shape(a.seqlen_q, kRow, a.heads_q, a.batch, kRow, 0, stream)};
}

void attention_backward(detail::RuntimeBackend& backend, const Attention& attention,
                        const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& o, const TensorView& lse, const TensorView& dout,
                        const TensorView& dq, const TensorView& dk, const TensorView& dv,
                        const BackwardConfig& config, Stream stream) {
  validate_backward_arguments(attention, q, k, v, o, lse, dout, dq, dk, dv);
  check_backward_config(config, attention, q);
  check_config_fits_device(config.shared_bytes(), backend.info());
  const BackwardTensors tensors{q, k, v, o, lse, dout, dq, dk, dv};
  TmaBackwardMaps tma;
  if (config.tma) {
    tma = tma_backward_maps(backend.info().arch(), tensors.q, tensors.k, tensors.v, tensors.dout,
                            config);
    if (!tma.problem.empty()) {
      throw InvalidArgument("config", "is the TMA backward, and " + tma.problem);
    }
  }
  if (backward_is_empty(attention)) return;
  launch_backward(backend, attention, tensors, config, stream, tma.maps);
}

void launch_attention_backward_sequences(
    detail::RuntimeBackend& backend, const Attention& attention, const SequenceIndex& sequences,
    const std::vector<detail::KernelBuffer>& index_buffers, const TensorView& q,
    const TensorView& k, const TensorView& v, const TensorView& o, const TensorView& lse,
    const TensorView& dout, const TensorView& dq, const TensorView& dk, const TensorView& dv,
    BackwardConfig config, Stream stream) {
  const BackwardTensors tensors{q, k, v, o, lse, dout, dq, dk, dv};
  const std::vector<emulator::TensorMap> maps =
      maps_or_fallback(config, backend.info().arch(), tensors);
  launch_backward(backend, attention, tensors, config, stream, maps, sequences, index_buffers);
}

void run_attention_backward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                            const Attention& attention, const TensorView& q, const TensorView& k,
                            const TensorView& v, const TensorView& o, const TensorView& lse,
                            const TensorView& dout, const TensorView& dq, const TensorView& dk,
                            const TensorView& dv, Stream stream) {
  validate_backward_arguments(attention, q, k, v, o, lse, dout, dq, dk, dv);
  if (backward_is_empty(attention)) return;
  const Attention run = with_automatic_block_mask(backend, attention, stream);
  // With modifiers, the problem's key has their digest and its candidates compile them in.
  BackwardConfig config = choice.choose_as<BackwardConfig>(AttentionProblem(true, q.dtype, run));
  const BackwardTensors tensors{q, k, v, o, lse, dout, dq, dk, dv};
  const std::vector<emulator::TensorMap> maps =
      maps_or_fallback(config, backend.info().arch(), tensors);
  launch_backward(backend, run, tensors, config, stream, maps);
}

}  // namespace flashjit::kernels
