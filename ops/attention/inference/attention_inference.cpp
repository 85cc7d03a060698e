#include "attention/inference/attention_inference.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "attention/attention_common.hpp"
#include "attention/hopper/attention_forward_tma.hpp"
#include "attention/inference/decode_tuning.hpp"
#include "attention/inference/index_check_params.cuh"
#include "attention/inference/kvcache_append.hpp"
#include "attention/inference/unused_rows.hpp"
#include "attention/modifiers/attention_captures.hpp"
#include "attention/modifiers/score_modifiers.hpp"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"
#include "merge_states/merge_states.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

constexpr int kIndexCheckThreads = 128;  // the kernel's __launch_bounds__: one per sequence

std::vector<std::int32_t> host_copy(detail::RuntimeBackend& backend, const TensorView& view) {
  if (!present(view) || view.numel() == 0) return {};
  std::vector<std::int32_t> values(static_cast<std::size_t>(view.span_bytes() / 4));
  backend.copy_to_host(values.data(), view.data, values.size() * 4);
  return values;
}

/// A workspace-backed fp32 tensor of `shape` at `offset` floats into `workspace`.
TensorView workspace_view(void* workspace, std::size_t offset,
                          std::initializer_list<std::int64_t> shape) {
  return TensorView::contiguous(static_cast<float*>(workspace) + offset, DType::f32, shape);
}

/// The split partials, and the merge of tokens [first, first + count) of them into o and lse
/// (views of those tokens as [tokens, heads, head_dim] and [tokens, heads]).
struct Partials {
  TensorView o;    // (splits, tokens, heads_q, head_dim_v)
  TensorView lse;  // (splits, tokens, heads_q)

  void merge_into(detail::RuntimeBackend& backend, std::int64_t first, std::int64_t count,
                  const TensorView& out, const TensorView& out_lse, Stream stream) const {
    TensorView part_o = o, part_lse = lse;
    part_o.data = static_cast<float*>(o.data) + first * o.strides[1];
    part_o.shape[1] = count;
    part_lse.data = static_cast<float*>(lse.data) + first * lse.strides[1];
    part_lse.shape[1] = count;
    run_merge_states(backend, part_o, part_lse, out, out_lse, stream);
  }
};

/// Merges the partials into o and lse: once over every token where o and lse flatten to
/// [tokens, ...], else sequence by sequence.
void merge_partials(detail::RuntimeBackend& backend, const Attention& a, const Sequences& s,
                    const InferenceTensors& t, const Partials& partials, Stream stream) {
  const TensorView& o = t.o;  // rank 4, batch 1 when packed
  const bool has_lse = present(t.lse);
  const auto out_o = [&](std::int64_t batch, std::int64_t tokens, std::int64_t token_stride) {
    const auto element = static_cast<std::int64_t>(dtype_size(o.dtype));
    return TensorView::strided(static_cast<char*>(o.data) + batch * o.strides[0] * element, o.dtype,
                               {tokens, a.heads_q, a.value_head_dim()},
                               {token_stride, o.strides[2], 1});
  };
  const auto out_lse = [&](std::int64_t batch, std::int64_t tokens, std::int64_t token_stride) {
    if (!has_lse) return TensorView{};
    return TensorView::strided(static_cast<float*>(t.lse.data) + batch * t.lse.strides[0],
                               DType::f32, {tokens, a.heads_q}, {token_stride, t.lse.strides[1]});
  };
  // Token t = b · seqlen_q + i is one stride apart from t + 1 when a batch ends where the next
  // begins, when there is one batch (or a packed one), or one query per sequence.
  const bool one_run = present(s.cu_seqlens_q) || a.batch == 1;
  const bool decode = a.seqlen_q == 1;
  const bool o_flat = one_run || decode || o.strides[0] == a.seqlen_q * o.strides[1];
  const bool lse_flat = !has_lse || one_run || decode;
  if (o_flat && lse_flat) {
    const std::int64_t o_token = !one_run && decode ? o.strides[0] : o.strides[1];
    const std::int64_t lse_token = !has_lse ? 0 : !one_run && decode ? t.lse.strides[0] : 1;
    partials.merge_into(backend, 0, t.total_q, out_o(0, t.total_q, o_token),
                        out_lse(0, t.total_q, lse_token), stream);
    return;
  }
  for (std::int64_t b = 0; b < a.batch; ++b) {
    partials.merge_into(backend, b * a.seqlen_q, a.seqlen_q, out_o(b, a.seqlen_q, o.strides[1]),
                        out_lse(b, a.seqlen_q, 1), stream);
  }
}

std::vector<detail::KernelBuffer> buffers_of(const Attention& a, const Sequences& s,
                                             const InferenceTensors& t,
                                             const std::optional<Partials>& partials) {
  std::vector<detail::KernelBuffer> buffers = {kernel_buffer(t.q, "q"), kernel_buffer(t.k, "k"),
                                               kernel_buffer(t.v, "v")};
  if (partials) {
    buffers.push_back(kernel_buffer(partials->o, "partial_o"));
    buffers.push_back(kernel_buffer(partials->lse, "partial_lse"));
  } else {
    buffers.push_back(kernel_buffer(t.o, "o"));
    if (present(t.lse)) buffers.push_back(kernel_buffer(t.lse, "lse"));
  }
  add_index_buffers(s, buffers);
  if (present(s.k_descale)) buffers.push_back(kernel_buffer(s.k_descale, "k_descale"));
  if (present(s.v_descale)) buffers.push_back(kernel_buffer(s.v_descale, "v_descale"));
  add_capture_buffers(a, buffers);
  return buffers;
}

}  // namespace

std::array<IndexArray, 7> index_arrays(const Sequences& s) {
  return {{{&s.cu_seqlens_q, "sequences.cu_seqlens_q"},
           {&s.cu_seqlens_k, "sequences.cu_seqlens_k"},
           {&s.seqlens_k, "sequences.seqlens_k"},
           {&s.seqused_q, "sequences.seqused_q"},
           {&s.page_table, "sequences.page_table"},
           {&s.cache_batch_idx, "sequences.cache_batch_idx"},
           {&s.cache_leftpad, "sequences.cache_leftpad"}}};
}

void add_index_buffers(const Sequences& s, std::vector<detail::KernelBuffer>& buffers) {
  constexpr std::size_t kPrefix = sizeof("sequences.") - 1;  // the kernels' buffers: field names
  for (const auto& [view, name] : index_arrays(s)) {
    if (present(*view)) buffers.push_back(kernel_buffer(*view, name + kPrefix));
  }
}

SequenceIndex sequence_index(const Sequences& s, std::int64_t page_size) {
  return {static_cast<const int*>(s.cu_seqlens_q.data),
          static_cast<const int*>(s.cu_seqlens_k.data),
          static_cast<const int*>(s.seqlens_k.data),
          static_cast<const int*>(s.seqused_q.data),
          static_cast<const int*>(s.page_table.data),
          present(s.page_table) ? s.page_table.strides[0] : 0,
          static_cast<int>(page_size),
          static_cast<const int*>(s.cache_batch_idx.data),
          static_cast<const int*>(s.cache_leftpad.data),
          cache_descale(s.k_descale),
          cache_descale(s.v_descale),
          CacheDescale{nullptr, 0, 0}};  // q_descale: the dense fp8 forward's only
}

HostIndices read_indices(detail::RuntimeBackend& backend, const Sequences& s) {
  return {
      host_copy(backend, s.cu_seqlens_q),    host_copy(backend, s.cu_seqlens_k),
      host_copy(backend, s.seqlens_k),       host_copy(backend, s.seqused_q),
      host_copy(backend, s.page_table),      present(s.page_table) ? s.page_table.strides[0] : 0,
      host_copy(backend, s.cache_batch_idx), host_copy(backend, s.cache_leftpad)};
}

detail::KernelSpec index_check_spec(const std::string& arch) {
  detail::KernelSpec spec;
  spec.op = "attention-forward";
  spec.header = "attention/inference/index_check_kernel.cuh";
  spec.name_expression = "flashjit::attention_index_check_kernel";
  spec.arch = arch;
  spec.role = "index_check";
  spec.readable_name = "attention_index_check";
  spec.threads = kIndexCheckThreads;
  return spec;
}

IndexViolationFound find_index_violation(detail::RuntimeBackend& backend, const Attention& a,
                                         const Sequences& s, const InferenceTensors& t,
                                         Stream stream) {
  if (a.batch == 0) return {};
  constexpr unsigned long long kNone = ~0ull;
  DeviceBuffer first = backend.allocate_buffer(sizeof kNone);
  backend.copy_to_device(first.data(), &kNone, sizeof kNone);
  IndexCheckParams params{};
  params.sequences = sequence_index(s, t.page_size);
  params.batch = static_cast<int>(a.batch);
  params.seqlen_q = static_cast<int>(a.seqlen_q);
  params.seqlen_k = static_cast<int>(a.seqlen_k);
  params.total_q = static_cast<int>(t.total_q);
  params.total_k = present(s.cu_seqlens_k) ? static_cast<int>(t.k.shape[1]) : 0;
  params.num_pages = static_cast<int>(t.num_pages);
  params.appended = static_cast<int>(t.seqlen_new);
  params.cache_rows = static_cast<int>(t.cache_rows);
  params.rotary_positions = static_cast<int>(t.rotary_positions);
  params.rotary_queries_advance = t.rotary_queries_advance;
  params.first = static_cast<unsigned long long*>(first.data());
  std::vector<detail::KernelBuffer> buffers = {{first.data(), first.size(), "first"}};
  add_index_buffers(s, buffers);
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(ceil_div(a.batch, kIndexCheckThreads));
  shape.block_x = kIndexCheckThreads;
  shape.stream = static_cast<CUstream>(stream);
  detail::launch_kernel(backend.executor(), index_check_spec(backend.info().arch()), shape, buffers,
                        params);
  backend.synchronize(stream);
  unsigned long long key = kNone;
  backend.copy_to_host(&key, first.data(), sizeof key);
  if (key == kNone) return {};
  return {true, static_cast<std::int64_t>(key >> 32), static_cast<unsigned>((key >> 24) & 0xff),
          static_cast<std::int64_t>(key & 0xffffff)};
}

void check_indices_of(detail::RuntimeBackend& backend, const Attention& a, const Sequences& s,
                      const InferenceTensors& t, bool check_indices, Stream stream) {
  if (backend.kind() == Backend::emulator) {
    check_index_values(a, t, read_indices(backend, s));
    return;
  }
  if (!check_indices) return;
  const IndexViolationFound bad = find_index_violation(backend, a, s, t, stream);
  if (!bad.found) return;
  check_index_values(a, t, read_indices(backend, s));  // names the array, position and value
  static const char* const kArrays[] = {"sequences",
                                        "sequences.cu_seqlens_q",
                                        "sequences.cu_seqlens_k",
                                        "sequences.seqlens_k",
                                        "sequences.page_table",
                                        "sequences.cache_batch_idx",
                                        "sequences.cache_leftpad",
                                        "sequences.seqused_q",
                                        "sequences.rotary_cos"};
  throw InvalidArgument(kArrays[bad.kind < 9 ? bad.kind : 0],
                        "holds a bad index for sequence " + std::to_string(bad.sequence) +
                            " (found by the device-side check)");
}

namespace {

/// Throws InvalidArgument("config") unless `config` runs a call of `a` on `layout`.
void check_inference_config(const InferenceConfig& config, const Attention& a, CacheLayout layout,
                            DType dtype) {
  const ForwardConfig& f = config.forward;
  const InferenceConfig expected = with_layout(f, a, layout, config.splits);
  std::string problem;
  if (config.splits < 1 || config.splits > kMaxSplits) {
    problem = "splits " + std::to_string(config.splits) + " (must be 1 to " +
              std::to_string(kMaxSplits) + ")";
  } else if (f.path() == ForwardPath::decode &&
             (!runs_decode_kernel(a, layout) || !f.valid() || config.splits > kMaxSplits)) {
    problem =
        "a decode kernel config for a call it does not run (more than 16 queries or 32 "
        "packed rows, head dims past 256) or an invalid one";
  } else if (f.path() != ForwardPath::decode &&
             (f.path() != (runs_wide(a) ? ForwardPath::wide : ForwardPath::mma_sync) ||
              !f.valid())) {
    problem = runs_wide(a) ? "a forward that is not a valid config of the wide path (head dims "
                             "past 256)"
                           : "a forward that is not a valid config of the mma.sync path";
  } else if (!(config == expected)) {
    problem = "layout flags that are not the call's";
  } else if (f.dtype != dtype || f.head_dim != a.head_dim || f.softcap != (a.softcap > 0.0f) ||
             (f.mask == MaskKind::none && forward_mask_kind(a) == MaskKind::window) ||
             (runs_wide(a) && f.head_dim_v() != a.value_head_dim())) {
    problem = "a dtype, head dim, softcap or mask kind that is not the call's";
  }
  if (!problem.empty()) throw InvalidArgument("config", "has " + problem);
}

/// The TMA forward's launch for a validated, index-checked, non-empty call whose default
/// `fallback` (mma.sync) would run unsplit on packed queries and keys, on sm_90a:
/// FlashAttention-3 takes packed prefill on its TMA kernel too. Its default tile for the call's
/// dtype, head dim, mask and softcap, one CTA per (query block, head, sequence), query blocks of
/// the longest sequence (the shorter ones' last CTAs find no row), the call's score and mask
/// modifiers compiled in (b the sequence, indices within it), over a 16-bit or an fp8 cache
/// (whose blocks the kernel's producer converts); std::nullopt where it has no
/// such tile, the keys are paged, or TMA cannot read the tensors. Not with seqlens_k either:
/// TMA's last key block reads on past a sequence's keys, rows a masked score multiplies by 0,
/// which holds for the next sequence's keys but not for whatever lies in the packed keys a
/// seqlens_k leaves unused (0 · NaN); mma.sync's loads stop at the length. (seqused_q is
/// fine: the query rows TMA reads past it are their own scores' alone, and not stored.)
std::optional<ForwardLaunch> packed_tma_launch(const Attention& a, const Sequences& s,
                                               const InferenceTensors& t,
                                               const InferenceConfig& fallback,
                                               const DeviceInfo& device, Stream stream) {
  if (fallback.splits != 1 || a.dropout_p > 0.0f || !present(s.cu_seqlens_q) ||
      !present(s.cu_seqlens_k) || present(s.seqlens_k) || present(s.page_table) ||
      fallback.forward.pack_gqa || fallback.forward.path() == ForwardPath::wide) {
    return std::nullopt;
  }
  const ForwardConfig& tile = fallback.forward;
  const std::optional<ForwardConfig> config = packed_prefill_tma_config(
      tile.dtype, tile.head_dim, tile.mask, tile.softcap, device.arch(), tile.kv_e4m3);
  if (!config || static_cast<std::size_t>(config->shared_bytes()) > device.shared_memory_optin) {
    return std::nullopt;
  }
  ForwardLaunch launch;
  launch.params = forward_params(a, t.q, t.k, t.v, t.o, t.lse);
  launch.params.sequences = sequence_index(s, 0);
  launch.maps = packed_tma_maps(launch.params, a, t.total_q, t.k.shape[1], config->block_m,
                                config->block_n, config->kv_e4m3);
  if (!tma_maps_problem(launch.maps).empty()) return std::nullopt;
  launch.spec = &launch_forward_spec(*config, device.arch(), score_modifiers(a));
  launch.shape.grid_x =
      static_cast<unsigned>(ceil_div(a.seqlen_q, config->block_m) * a.heads_q * a.batch);
  launch.shape.block_x = static_cast<unsigned>(config->warps * 32);
  launch.shape.dynamic_shared_bytes = static_cast<std::size_t>(config->shared_bytes());
  launch.shape.stream = static_cast<CUstream>(stream);
  launch.buffers = buffers_of(a, s, t, std::nullopt);
  return launch;
}

/// With seqused_q, after the attention: the rows past each sequence's used queries get o 0 and
/// lse -inf.
void fill_unused_queries(detail::RuntimeBackend& backend, const Attention& a, const Sequences& s,
                         const InferenceTensors& t, Stream stream) {
  const SequenceRows queries{s.cu_seqlens_q, s.seqused_q, a.batch, a.seqlen_q};
  fill_unused_rows(backend, t.o, false, queries, 0.0f, stream);
  if (present(t.lse)) {
    fill_unused_rows(backend, t.lse, true, queries, -std::numeric_limits<float>::infinity(),
                     stream);
  }
}

/// Launches a validated, index-checked, non-empty call with `config`.
void launch_inference(detail::RuntimeBackend& backend, const Attention& a, const Sequences& s,
                      const InferenceTensors& t, const InferenceConfig& config, Stream stream) {
  check_config_fits_device(config.shared_bytes(), backend.info());
  AttentionForwardParams params = forward_params(a, t.q, t.k, t.v, t.o, t.lse);
  params.sequences = sequence_index(s, t.page_size);
  std::optional<Partials> partials;
  const int splits = config.splits;
  if (config.forward.split) {
    // The partials live in the stream's held workspace: a decoding call allocates nothing.
    const std::int64_t o_floats = splits * t.total_q * a.heads_q * a.value_head_dim();
    const std::int64_t lse_floats = splits * t.total_q * a.heads_q;
    void* workspace = backend.held_workspace(
        static_cast<std::size_t>(o_floats + lse_floats) * sizeof(float), stream);
    partials =
        Partials{workspace_view(workspace, 0, {splits, t.total_q, a.heads_q, a.value_head_dim()}),
                 workspace_view(workspace, static_cast<std::size_t>(o_floats),
                                {splits, t.total_q, a.heads_q})};
    params.split = {static_cast<float*>(partials->o.data),
                    static_cast<float*>(partials->lse.data),
                    partials->o.strides[0],
                    partials->o.strides[1],
                    partials->lse.strides[0],
                    partials->lse.strides[1],
                    splits,
                    nullptr};
  }
  const std::int64_t group = config.forward.pack_gqa ? a.heads_q / a.heads_kv : 1;
  // The decode kernel merges its splits itself: the last of a (sequence, head, query block)'s
  // CTAs to finish, counted at a counter of the backend's (left zero for the next call).
  const bool merged_in_launch = partials && config.forward.path() == ForwardPath::decode;
  std::vector<detail::KernelBuffer> buffers = buffers_of(a, s, t, partials);
  if (merged_in_launch) {
    const auto counters =
        static_cast<std::size_t>(query_blocks(config, a) * (a.heads_q / group) * a.batch);
    params.split.arrivals = backend.zeroed_counters(counters, stream);
    buffers.push_back({params.split.arrivals, counters * sizeof(int), "arrivals"});
    buffers.push_back(kernel_buffer(t.o, "o"));
    if (present(t.lse)) buffers.push_back(kernel_buffer(t.lse, "lse"));
  }
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(query_blocks(config, a) * splits);
  shape.grid_y = static_cast<unsigned>(a.heads_q / group);
  shape.grid_z = static_cast<unsigned>(a.batch);
  shape.block_x = static_cast<unsigned>(config.forward.warps * 32);
  shape.dynamic_shared_bytes = static_cast<std::size_t>(config.shared_bytes());
  shape.stream = static_cast<CUstream>(stream);
  // The decode kernel waits for the grid before it (an append, the caller's last kernel), so
  // its launch and set-up may overlap that grid's tail.
  shape.overlap_previous = config.forward.path() == ForwardPath::decode;
  detail::launch_kernel(
      backend.executor(),
      launch_forward_spec(config.forward, backend.info().arch(), score_modifiers(a)), shape,
      buffers, params);
  if (partials && !merged_in_launch) merge_partials(backend, a, s, t, *partials, stream);
  fill_unused_queries(backend, a, s, t, stream);
}

/// The layout of a validated call's tensors, V in the keys included.
CacheLayout call_layout(const Sequences& s, const InferenceTensors& t) {
  CacheLayout layout = cache_layout(s, t.page_size, t.k.dtype);
  layout.values_in_keys = values_in_keys(t.k, t.v);
  return layout;
}

bool is_empty(const Attention& a, const InferenceTensors& t) {
  return a.batch == 0 || a.seqlen_q == 0 || t.total_q == 0;
}

/// A validated, index-checked call as its attention runs: after an append (queued here, even
/// when there are no queries), on the grown lengths and the rotated queries; else as it came.
struct AttentionCall {
  std::optional<AppendedCache> appended;  // owns the workspace until the launches are queued
  Sequences sequences;
  InferenceTensors tensors;
};
AttentionCall append_if_asked(detail::RuntimeBackend& backend, const Attention& a,
                              const Sequences& s, const InferenceTensors& t, Stream stream) {
  AttentionCall call{std::nullopt, s, t};
  if (!appends(s) || a.batch == 0) return call;
  call.appended.emplace(append_to_cache(backend, a, s, t, stream));
  call.sequences = call.appended->sequences;
  call.tensors.q = call.appended->q;
  call.tensors.seqlen_new = 0;
  return call;
}

}  // namespace

void attention_forward_sequences(detail::RuntimeBackend& backend, const Attention& a,
                                 const Sequences& s, const TensorView& q, const TensorView& k,
                                 const TensorView& v, const TensorView& o, const TensorView& lse,
                                 const InferenceConfig& config, bool check_indices, Stream stream) {
  const InferenceTensors checked = validate_inference_arguments(a, s, q, k, v, o, lse);
  check_inference_config(config, a, call_layout(s, checked), q.dtype);
  check_indices_of(backend, a, s, checked, check_indices, stream);
  const AttentionCall call = append_if_asked(backend, a, s, checked, stream);
  if (!is_empty(a, call.tensors)) {
    launch_inference(backend, a, call.sequences, call.tensors, config, stream);
  }
}

void run_attention_forward_sequences(detail::RuntimeBackend& backend, ConfigChoice& choice,
                                     const Attention& a, const Sequences& sequences,
                                     const TensorView& q, const TensorView& k, const TensorView& v,
                                     const TensorView& o, const TensorView& lse, bool check_indices,
                                     Stream stream) {
  const InferenceTensors checked = validate_inference_arguments(a, sequences, q, k, v, o, lse);
  check_indices_of(backend, a, sequences, checked, check_indices, stream);
  const AttentionCall call = append_if_asked(backend, a, sequences, checked, stream);
  const Sequences& s = call.sequences;
  const InferenceTensors& t = call.tensors;
  if (is_empty(a, t)) return;
  const CacheLayout layout = call_layout(s, t);
  const DeviceInfo& device = backend.info();
  // A forced split count is the caller's choice; the tile then stays the default's. Calls with
  // modifiers run untuned: decoding's tuning key has no modifiers (the dense calls' has).
  // With seqused_q, unsplit unless the caller forces splits (their merge then covers the
  // unused rows too, whose partials no split wrote; the fill after it writes those rows).
  const bool unsplit = present(s.seqused_q) && s.splits == 0;
  // The wide path runs untuned too (its space is not the decoding space's).
  const bool decoding = a.seqlen_q <= kMaxDecodeQueries && s.splits == 0 && !unsplit &&
                        score_modifiers(a).empty() && !runs_wide(a);
  const InferenceConfig config =
      decoding
          ? choice.choose_as<InferenceConfig>(DecodeProblem(q.dtype, a, layout, device.sm_count))
          : default_inference_config(a, layout, q.dtype, device.arch(), device.sm_count,
                                     unsplit ? 1 : s.splits);
  if (!decoding) {
    if (std::optional<ForwardLaunch> tma = packed_tma_launch(a, s, t, config, device, stream)) {
      launch_planned_forward(backend, std::move(*tma));
      fill_unused_queries(backend, a, s, t, stream);
      return;
    }
  }
  launch_inference(backend, a, s, t, config, stream);
}

}  // namespace flashjit::kernels
