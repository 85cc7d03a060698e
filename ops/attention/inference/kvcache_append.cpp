#include "attention/inference/kvcache_append.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "attention/attention_common.hpp"
#include "attention/inference/attention_inference.hpp"
#include "attention/inference/attention_inference_config.hpp"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace {

std::string str(std::int64_t value) { return std::to_string(value); }

constexpr int kThreads = kKVCacheAppendThreads;

/// Both members of a pair present or both absent.
void check_pair(const TensorView& first, const TensorView& second, const char* first_name,
                const char* second_name) {
  if (present(first) == present(second)) return;
  throw InvalidArgument(
      present(first) ? second_name : first_name,
      std::string("is missing; ") + first_name + " and " + second_name + " come together");
}

/// The layouts an append works with.
void check_append_layout(const Sequences& s) {
  if (!present(s.k_new)) {
    if (present(s.rotary_cos)) {
      throw InvalidArgument("sequences.rotary_cos",
                            "needs sequences.k_new and v_new: rotary embedding is applied to the "
                            "new keys on their way into the cache (and to q)");
    }
    return;
  }
  if (!present(s.seqlens_k)) {
    throw InvalidArgument("sequences.seqlens_k",
                          "is required with k_new: each sequence's cached key count, where its "
                          "new keys go");
  }
  if (present(s.cu_seqlens_k)) {
    throw InvalidArgument("sequences.cu_seqlens_k",
                          "must be absent with k_new: new keys are appended to a dense or paged "
                          "cache, not to packed keys");
  }
}

/// The rotary tables: fp32 [positions, rotary_dim / 2], equal shapes and strides, unit last
/// stride, positions covering seqlen_k, rotary_dim from 2 to head_dim.
void check_rotary_tables(const Attention& a, const Sequences& s) {
  const TensorView& cos = s.rotary_cos;
  const TensorView& sin = s.rotary_sin;
  for (const auto& [view, name] :
       {std::pair{&cos, "sequences.rotary_cos"}, std::pair{&sin, "sequences.rotary_sin"}}) {
    check_tensor(*view, name, 2);
    if (view->dtype != DType::f32) {
      throw InvalidArgument(std::string(name) + ".dtype",
                            "is " + std::string(dtype_name(view->dtype)) + "; must be fp32");
    }
    if (view->shape[1] > 1 && view->strides[1] != 1) {
      throw InvalidArgument(std::string(name) + ".strides",
                            "the last stride is " + str(view->strides[1]) + "; must be 1");
    }
  }
  const std::int64_t pairs = cos.shape[1];
  if (pairs < 1 || 2 * pairs > a.head_dim) {
    throw InvalidArgument("sequences.rotary_cos.shape",
                          "has " + str(pairs) + " pairs (rotary_dim / 2); must be from 1 to " +
                              str(a.head_dim / 2) + " (head_dim / 2)");
  }
  if (cos.shape[0] < a.seqlen_k) {
    throw InvalidArgument("sequences.rotary_cos.shape",
                          "has " + str(cos.shape[0]) +
                              " positions; must cover attention.seqlen_k = " + str(a.seqlen_k));
  }
  check_shape(sin, "sequences.rotary_sin", {cos.shape[0], pairs}, "rotary_cos's shape");
  if (sin.strides[0] != cos.strides[0]) {
    throw InvalidArgument("sequences.rotary_sin.strides",
                          "are not rotary_cos's (" + str(cos.strides[0]) + ", 1)");
  }
}

/// The cache, written now, shares no memory with any other tensor of the call.
void check_cache_disjoint(const Sequences& s, const InferenceTensors& t, const TensorView& q,
                          const TensorView& o, const TensorView& lse) {
  check_no_self_overlap(t.k, "k");
  check_no_self_overlap(t.v, "v");
  if (values_in_keys(t.k, t.v)) {
    throw InvalidArgument("sequences.v_new",
                          "would be written into v, which is k's first columns (one latent "
                          "cache, as MLA's): write the new rows into the cache before the call, "
                          "or give v a cache of its own");
  }
  check_disjoint(t.k, t.v, "k", "v", Role::output);
  const auto check_other = [&](const TensorView& other, const char* name) {
    if (!present(other)) return;
    check_disjoint(t.k, other, "k", name, Role::input);
    check_disjoint(t.v, other, "v", name, Role::input);
  };
  check_other(q, "q");
  check_other(o, "o");
  check_other(lse, "lse");
  check_other(s.k_new, "sequences.k_new");
  check_other(s.v_new, "sequences.v_new");
  check_other(s.rotary_cos, "sequences.rotary_cos");
  check_other(s.rotary_sin, "sequences.rotary_sin");
  for (const auto& [view, name] : index_arrays(s)) check_other(*view, name);
  for (const auto& [input, name] :
       {std::pair{&s.k_new, "sequences.k_new"}, std::pair{&s.v_new, "sequences.v_new"},
        std::pair{&s.rotary_cos, "sequences.rotary_cos"},
        std::pair{&s.rotary_sin, "sequences.rotary_sin"}}) {
    if (!present(*input)) continue;
    check_disjoint(o, *input, "o", name, Role::input);
    if (present(lse)) check_disjoint(lse, *input, "lse", name, Role::input);
  }
}

HeadTensor absent_head_tensor() { return {nullptr, 0, 0, 0}; }

/// FlashAttention's rule: with causal or a window, query i sits at the cache's length plus i
/// (the new tokens' own positions); otherwise every query at the cache's length.
bool query_positions_advance(const Attention& a) {
  return a.causal || a.window_left >= 0 || a.window_right >= 0;
}

}  // namespace

bool appends(const Sequences& s) { return present(s.k_new) || present(s.v_new); }

bool rotary_queries_advance(const Attention& a, const Sequences& s) {
  return present(s.rotary_cos) && query_positions_advance(a);
}

RotaryKind rotary_kind(const Sequences& s) {
  if (!present(s.rotary_cos)) return RotaryKind::none;
  return s.rotary_interleaved ? RotaryKind::interleaved : RotaryKind::half;
}

std::int64_t validate_append_arguments(const Attention& a, const Sequences& s,
                                       const InferenceTensors& t, const TensorView& q,
                                       const TensorView& o, const TensorView& lse) {
  check_pair(s.k_new, s.v_new, "sequences.k_new", "sequences.v_new");
  check_pair(s.rotary_cos, s.rotary_sin, "sequences.rotary_cos", "sequences.rotary_sin");
  check_append_layout(s);
  if (!appends(s)) return 0;
  check_tensor(s.k_new, "sequences.k_new", 4);
  const std::int64_t seqlen_new = s.k_new.shape[1];
  if (seqlen_new > a.seqlen_k) {
    throw InvalidArgument(
        "sequences.k_new.shape",
        "has seqlen_new (dimension 1) " + str(seqlen_new) +
            "; more than the cache holds (attention.seqlen_k = " + str(a.seqlen_k) + ")");
  }
  const char* dims = "[batch, seqlen_new, heads_kv, head_dim]";
  check_head_tensor(s.k_new, "sequences.k_new", a.batch, seqlen_new, a.heads_kv, a.head_dim, dims);
  check_tensor(s.v_new, "sequences.v_new", 4);
  check_head_tensor(s.v_new, "sequences.v_new", a.batch, seqlen_new, a.heads_kv, a.value_head_dim(),
                    a.head_dim_v != 0 ? "k_new's [batch, seqlen_new, heads_kv, head_dim_v]"
                                      : "k_new's [batch, seqlen_new, heads_kv, head_dim]");
  // The new rows are in the cache's type: q's, or e4m3 codes in an fp8 cache's scale.
  check_same_dtype(s.k_new, t.k, "sequences.k_new", "k (the cache)");
  check_same_dtype(s.v_new, t.k, "sequences.v_new", "k (the cache)");
  if (present(s.rotary_cos)) check_rotary_tables(a, s);
  check_cache_disjoint(s, t, q, o, lse);
  return seqlen_new;
}

detail::KernelSpec kvcache_append_spec(DType dtype, RotaryKind rotary, const std::string& arch,
                                       bool kv_e4m3) {
  static const char* const kRotaryNames[] = {"none", "half", "interleaved"};
  const char* rotary_name = kRotaryNames[static_cast<int>(rotary)];
  detail::KernelSpec spec;
  spec.op = "attention-forward";
  spec.header = "attention/inference/kvcache_append_kernel.cuh";
  spec.name_expression = "flashjit::kvcache_append_kernel<flashjit::KVCacheAppendConfig<" +
                         template_element(dtype) + ", flashjit::RotaryKind::" + rotary_name +
                         (kv_e4m3 ? ", flashjit::e4m3_t" : "") + ">>";
  spec.arch = arch;
  spec.role = "kvcache_append";
  spec.traits = {std::string(dtype_name(dtype)), std::string("rope_") + rotary_name};
  if (kv_e4m3) spec.traits.emplace_back("kv_e4m3");
  spec.readable_name = detail::name_of("attention_kvcache_append", 0, spec.traits);
  spec.threads = kThreads;
  return spec;
}

std::vector<detail::KernelSpec> kvcache_append_specs(const std::string& arch) {
  std::vector<detail::KernelSpec> specs;
  for (bool kv_e4m3 : {false, true}) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      for (RotaryKind rotary : {RotaryKind::none, RotaryKind::half, RotaryKind::interleaved}) {
        specs.push_back(kvcache_append_spec(dtype, rotary, arch, kv_e4m3));
      }
    }
  }
  return specs;
}

AppendedCache append_to_cache(detail::RuntimeBackend& backend, const Attention& a,
                              const Sequences& s, const InferenceTensors& t, Stream stream) {
  const bool rotate_q = rotary_kind(s) != RotaryKind::none;
  const std::size_t element = dtype_size(t.q.dtype);
  // The rotated q first: the allocation's alignment is what the attention's 16-byte loads need
  // (its size, a multiple of head_dim's 8 elements, keeps the lengths after it aligned too).
  const std::size_t q_bytes =
      rotate_q ? static_cast<std::size_t>(t.total_q * a.heads_q * a.head_dim) * element : 0;
  AppendedCache out{backend.allocate_buffer_on_stream(
                        q_bytes + static_cast<std::size_t>(a.batch) * sizeof(int), stream),
                    s, t.q};
  char* base = static_cast<char*>(out.workspace.data());
  out.sequences.k_new = out.sequences.v_new = {};
  out.sequences.rotary_cos = out.sequences.rotary_sin = {};
  out.sequences.seqlens_k = TensorView::contiguous(base + q_bytes, DType::i32, {a.batch});
  if (rotate_q) {  // in the caller's layout of q, then the kernels' view of it, as q's is made
    const bool packed = present(s.cu_seqlens_q);
    const TensorView rotated =
        packed
            ? TensorView::contiguous(base, t.q.dtype, {t.total_q, a.heads_q, a.head_dim})
            : TensorView::contiguous(base, t.q.dtype, {a.batch, a.seqlen_q, a.heads_q, a.head_dim});
    out.q = inference_query_tensor(rotated, "q", a, packed, packed ? t.total_q : -1);
  }

  KVCacheAppendParams p{};
  p.k_new = head_tensor(s.k_new);
  p.v_new = head_tensor(s.v_new);
  p.q = head_tensor(t.q);
  p.q_rotated = rotate_q ? head_tensor(out.q) : absent_head_tensor();
  p.cu_seqlens_q = static_cast<const int*>(s.cu_seqlens_q.data);
  p.cache = {head_tensor(t.k),
             head_tensor(t.v),
             static_cast<const int*>(s.page_table.data),
             present(s.page_table) ? s.page_table.strides[0] : 0,
             static_cast<int>(t.page_size),
             static_cast<const int*>(s.cache_batch_idx.data)};
  if (rotate_q) {
    p.rotary = {static_cast<const float*>(s.rotary_cos.data),
                static_cast<const float*>(s.rotary_sin.data), s.rotary_cos.strides[0],
                static_cast<int>(2 * s.rotary_cos.shape[1])};
  }
  p.cache_seqlens = static_cast<const int*>(s.seqlens_k.data);
  p.seqlens_k_out = static_cast<int*>(out.sequences.seqlens_k.data);
  p.seqlen_new = static_cast<int>(t.seqlen_new);
  p.seqlen_q = static_cast<int>(a.seqlen_q);
  p.heads_kv = static_cast<int>(a.heads_kv);
  p.heads_q = static_cast<int>(a.heads_q);
  p.head_dim = static_cast<int>(a.head_dim);
  p.head_dim_v = static_cast<int>(a.value_head_dim());
  p.q_positions_advance = query_positions_advance(a);

  std::vector<detail::KernelBuffer> buffers = {
      kernel_buffer(s.k_new, "k_new"),
      kernel_buffer(s.v_new, "v_new"),
      kernel_buffer(t.q, "q"),
      kernel_buffer(t.k, "k"),
      kernel_buffer(t.v, "v"),
      kernel_buffer(out.sequences.seqlens_k, "seqlens_k_after_append")};
  add_index_buffers(s, buffers);  // the counts before the call, the pages, the cache rows
  if (rotate_q) {
    buffers.push_back(kernel_buffer(out.q, "q_rotated"));
    buffers.push_back(kernel_buffer(s.rotary_cos, "rotary_cos"));
    buffers.push_back(kernel_buffer(s.rotary_sin, "rotary_sin"));
  }
  detail::LaunchShape shape;
  const std::int64_t rows = std::max(t.seqlen_new, rotate_q ? a.seqlen_q : 0);
  shape.grid_x = static_cast<unsigned>(std::max<std::int64_t>(rows, 1));  // 1: the lengths
  shape.grid_y = static_cast<unsigned>(a.batch);
  shape.block_x = kThreads;
  shape.stream = static_cast<CUstream>(stream);
  shape.overlap_previous = true;  // the kernel waits for the grid before it
  detail::launch_kernel(backend.executor(),
                        kvcache_append_spec(t.q.dtype, rotary_kind(s), backend.info().arch(),
                                            t.k.dtype == DType::e4m3),
                        shape, buffers, p);
  return out;
}

}  // namespace flashjit::kernels
