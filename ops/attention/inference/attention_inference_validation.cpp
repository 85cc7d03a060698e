// Argument validation of the forward's inference layouts (docs/design.md, "Bad input"): the
// host-visible arguments before anything else, then the values of the index arrays, each error
// naming the argument, and for an index the position and value. Nothing is launched or written
// before.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_common.hpp"
#include "attention/inference/attention_inference.hpp"
#include "attention/inference/attention_inference_config.hpp"
#include "attention/inference/kvcache_append.hpp"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

std::string str(std::int64_t value) { return std::to_string(value); }

/// An int32 index array of exactly `shape` with unit stride along its last dimension.
void check_index_array(const TensorView& view, const std::string& name,
                       std::initializer_list<std::int64_t> shape, const std::string& dims) {
  check_tensor(view, name, static_cast<int>(shape.size()));
  if (view.dtype != DType::i32) {
    throw InvalidArgument(name + ".dtype",
                          "is " + std::string(dtype_name(view.dtype)) + "; must be int32");
  }
  check_shape(view, name, shape, dims);
  const int last = view.rank - 1;
  if (view.shape[last] > 1 && view.strides[last] != 1) {
    throw InvalidArgument(name + ".strides",
                          "the last stride is " + str(view.strides[last]) + "; must be 1");
  }
}

/// A packed [total, heads, head_dim] tensor as the kernel's rank-4 view with batch 1.
TensorView packed_view(const TensorView& view, const std::string& name, std::int64_t heads,
                       std::int64_t head_dim, const char* dims) {
  check_tensor(view, name, 3);
  if (view.shape[0] > kMaxSeqlen) {
    throw InvalidArgument(name + ".shape", "has " + str(view.shape[0]) +
                                               " packed rows; at most 2^30 (32-bit row math)");
  }
  TensorView four =
      TensorView::strided(view.data, view.dtype, {1, view.shape[0], view.shape[1], view.shape[2]},
                          {0, view.strides[0], view.strides[1], view.strides[2]});
  if (view.shape[1] != heads || view.shape[2] != head_dim) {
    throw InvalidArgument(name + ".shape", "is [" + str(view.shape[0]) + ", " + str(view.shape[1]) +
                                               ", " + str(view.shape[2]) + "]; expected " + dims +
                                               " with heads " + str(heads) + " and head_dim " +
                                               str(head_dim));
  }
  check_head_tensor(four, name, 1, view.shape[0], heads, head_dim, dims);
  return four;
}

/// Paged k or v: [num_pages, page_size, heads_kv, head_dim] (v: value_head_dim()), page_size
/// at least 1 (the paged loads find every key row's page on its own, so one token a page works
/// as 16 do).
void check_pages(const TensorView& view, const std::string& name, const Attention& a, bool value) {
  check_tensor(view, name, 4);
  if (view.shape[1] < 1) {
    throw InvalidArgument(name + ".shape", "has page_size (dimension 1) " + str(view.shape[1]) +
                                               "; must be at least 1");
  }
  check_head_tensor(view, name, view.shape[0], view.shape[1], a.heads_kv,
                    value ? a.value_head_dim() : a.head_dim,
                    value && a.head_dim_v != 0 ? "[num_pages, page_size, heads_kv, head_dim_v]"
                                               : "[num_pages, page_size, heads_kv, head_dim]");
}

/// The kernel's rank-3 view of lse: [batch, heads_q, seqlen_q], or packed [heads_q, total_q]
/// as batch 1 with batch stride 0.
TensorView lse_view(const TensorView& lse, const Attention& a, bool packed, std::int64_t total_q) {
  check_tensor(lse, "lse", packed ? 2 : 3);
  if (lse.dtype != DType::f32) {
    throw InvalidArgument("lse.dtype",
                          "is " + std::string(dtype_name(lse.dtype)) + "; must be fp32");
  }
  if (packed) {
    check_shape(lse, "lse", {a.heads_q, total_q}, "[heads_q, total_q]");
  } else {
    check_shape(lse, "lse", {a.batch, a.heads_q, a.seqlen_q}, "[batch, heads_q, seqlen_q]");
  }
  const int last = lse.rank - 1;
  if (lse.shape[last] > 1 && lse.strides[last] != 1) {
    throw InvalidArgument("lse.strides",
                          "the last stride is " + str(lse.strides[last]) + "; must be 1");
  }
  check_no_self_overlap(lse, "lse");
  if (!packed) return lse;
  return TensorView::strided(lse.data, lse.dtype, {1, a.heads_q, total_q}, {0, lse.strides[0], 1});
}

void check_layout_choice(const Sequences& s) {
  if (present(s.page_table) && present(s.cu_seqlens_k)) {
    throw InvalidArgument("sequences.cu_seqlens_k",
                          "must be absent with a page_table: a paged cache's keys are found "
                          "through its pages, and their counts in seqlens_k");
  }
  if (present(s.page_table) && !present(s.seqlens_k)) {
    throw InvalidArgument("sequences.seqlens_k",
                          "is required with a page_table: each sequence's key count");
  }
  for (const auto& [view, name] : {std::pair{&s.cache_batch_idx, "sequences.cache_batch_idx"},
                                   std::pair{&s.cache_leftpad, "sequences.cache_leftpad"}}) {
    if (!present(*view)) continue;
    if (present(s.cu_seqlens_k)) {
      throw InvalidArgument(name,
                            "must be absent with cu_seqlens_k: it indexes a cache (dense "
                            "[cache_batch, seqlen_k, heads_kv, head_dim], or paged), not packed "
                            "keys");
    }
  }
  if (present(s.cache_leftpad) && !present(s.seqlens_k)) {
    throw InvalidArgument("sequences.seqlens_k",
                          "is required with cache_leftpad: each sequence's keys end there");
  }
  if (s.splits < 0 || s.splits > kMaxSplits) {
    throw InvalidArgument(
        "sequences.splits",
        "is " + str(s.splits) + "; must be 0 (chosen) or 1 to " + str(kMaxSplits));
  }
  if (present(s.seqused_q) && present(s.k_new)) {
    throw InvalidArgument("sequences.seqused_q",
                          "must be absent with k_new: an append's queries are all used");
  }
}

/// The tensors' dtypes: q, k, v and o all fp16 or all bf16, or an fp8 cache (k and v e4m3,
/// q and o 16-bit) with its descale factors, whose 16-byte copies take 16 elements.
void check_inference_dtypes(const Attention& a, const Sequences& s, const TensorView& q,
                            const TensorView& k, const TensorView& v, const TensorView& o) {
  if (k.dtype != DType::e4m3 && v.dtype != DType::e4m3) {
    check_attention_dtypes(q, k, v, o);
    for (const auto& [view, name] : {std::pair{&s.k_descale, "sequences.k_descale"},
                                     std::pair{&s.v_descale, "sequences.v_descale"}}) {
      if (present(*view)) {
        throw InvalidArgument(name,
                              "is for an e4m3 cache; k is " + std::string(dtype_name(k.dtype)));
      }
    }
    return;
  }
  check_query_dtypes(q, o);
  check_same_dtype(v, k, "v", "k");
  if (a.head_dim % 16 != 0) {
    throw InvalidArgument(
        "attention.head_dim",
        "is " + str(a.head_dim) + "; an e4m3 cache needs a multiple of 16 (16 fp8 values a copy)");
  }
  if (a.value_head_dim() % 16 != 0) {
    throw InvalidArgument("attention.head_dim_v",
                          "is " + str(a.value_head_dim()) +
                              "; an e4m3 cache needs a multiple of 16 (16 fp8 values a copy)");
  }
  check_descale(s.k_descale, "sequences.k_descale", a);
  check_descale(s.v_descale, "sequences.v_descale", a);
}

/// Outputs share no memory with the inputs (index arrays included) or each other.
void check_outputs_disjoint(const Sequences& s, const TensorView& q, const TensorView& k,
                            const TensorView& v, const TensorView& o, const TensorView& lse) {
  check_no_self_overlap(o, "o");
  const auto check_input = [&](const TensorView& input, const char* name) {
    if (!present(input)) return;
    check_disjoint(o, input, "o", name, Role::input);
    if (present(lse)) check_disjoint(lse, input, "lse", name, Role::input);
  };
  check_input(q, "q");
  check_input(k, "k");
  check_input(v, "v");
  for (const auto& [view, name] : index_arrays(s)) check_input(*view, name);
  check_input(s.k_descale, "sequences.k_descale");
  check_input(s.v_descale, "sequences.v_descale");
  if (present(lse)) check_disjoint(o, lse, "o", "lse", Role::output);
}

/// cu_seqlens: from 0, nondecreasing, each sequence at most `longest`, ending within `rows`.
void check_offsets(const std::vector<std::int32_t>& cu, const std::string& name,
                   std::int64_t longest, const char* longest_name, std::int64_t rows,
                   const char* rows_name) {
  if (cu.empty()) return;
  if (cu[0] != 0) {
    throw InvalidArgument(name, "position 0 holds " + str(cu[0]) + "; must be 0");
  }
  for (std::size_t b = 0; b + 1 < cu.size(); ++b) {
    if (cu[b + 1] < cu[b]) {
      throw InvalidArgument(name, "decreases at position " + str(b + 1) + ": " + str(cu[b + 1]) +
                                      " after " + str(cu[b]) + "; must be nondecreasing");
    }
    if (cu[b + 1] - cu[b] > longest) {
      throw InvalidArgument(name, "gives sequence " + str(b) + " " + str(cu[b + 1] - cu[b]) +
                                      " rows (positions " + str(b) + " and " + str(b + 1) +
                                      "), more than " + longest_name + " = " + str(longest));
    }
  }
  if (cu.back() > rows) {
    throw InvalidArgument(name, "position " + str(cu.size() - 1) + " holds " + str(cu.back()) +
                                    ", past the " + str(rows) + " rows of " + rows_name);
  }
}

}  // namespace

namespace {

/// One side's tensor of an inference call: packed [total, heads, head_dim] when `packed` (of
/// `total` rows when that is >= 0, the rows of `total_of`), else [batch, seqlen, heads, head_dim].
struct TensorSide {
  std::int64_t seqlen, heads, head_dim;
  std::string dense_dims;
  std::string packed_dims;
  const char* total_of;
};

/// The query side (q, o) or the key side (k, v) of a call: its sizes and the shapes its
/// messages name, `value` taking the value head dim (o, v).
TensorSide side_of(const Attention& a, bool keys, bool value) {
  const std::string dim = value && a.head_dim_v != 0 ? "head_dim_v]" : "head_dim]";
  const std::string rows = keys ? "seqlen_k, heads_kv, " : "seqlen_q, heads_q, ";
  return {keys ? a.seqlen_k : a.seqlen_q,
          keys ? a.heads_kv : a.heads_q,
          value ? a.value_head_dim() : a.head_dim,
          "[batch, " + rows + dim,
          std::string(keys ? "[total_k, heads_kv, " : "[total_q, heads_q, ") + dim,
          keys ? "k" : "q"};
}

TensorView side_tensor(const TensorView& view, const std::string& name, const Attention& a,
                       const TensorSide& side, bool packed, std::int64_t total) {
  if (!packed) {
    check_tensor(view, name, 4);
    check_head_tensor(view, name, a.batch, side.seqlen, side.heads, side.head_dim,
                      side.dense_dims.c_str());
    return view;
  }
  const TensorView four =
      packed_view(view, name, side.heads, side.head_dim, side.packed_dims.c_str());
  if (total >= 0 && view.shape[0] != total) {
    throw InvalidArgument(name + ".shape", "has " + str(view.shape[0]) + " rows; " + side.total_of +
                                               " has " + str(total));
  }
  return four;
}

}  // namespace

TensorView inference_query_tensor(const TensorView& view, const std::string& name,
                                  const Attention& a, bool packed, std::int64_t total_q,
                                  bool value) {
  return side_tensor(view, name, a, side_of(a, /*keys=*/false, value), packed, total_q);
}

TensorView inference_key_tensor(const TensorView& view, const std::string& name, const Attention& a,
                                bool packed, std::int64_t total_k, bool value) {
  return side_tensor(view, name, a, side_of(a, /*keys=*/true, value), packed, total_k);
}

namespace {

/// The wide path (head dims past 256) reads 16-bit caches and compiles no modifiers.
void check_wide_call(const Attention& a, const TensorView& k) {
  if (!runs_wide(a)) return;
  const std::string past = "head_dim " + str(a.head_dim) + " (past 256, the wide forward)";
  if (k.dtype == DType::e4m3) {
    throw InvalidArgument("k.dtype", "is e4m3 with " + past +
                                         "; an e4m3 cache takes head dims "
                                         "up to 256, the wide forward reads fp16 or bf16");
  }
  if (!a.score_mod.empty() || !a.mask_mod.empty()) {
    throw InvalidArgument(a.score_mod.empty() ? "attention.mask_mod" : "attention.score_mod",
                          "is set with " + past + "; modifiers run at head dims up to 256");
  }
}

/// Dropout is for training: variable lengths over 16-bit keys (the mma.sync kernels).
void check_inference_dropout(const Attention& a, const Sequences& s, const TensorView& k) {
  if (a.dropout_p > 0.0f &&
      (present(s.page_table) || present(s.k_new) || k.dtype == DType::e4m3 || runs_wide(a))) {
    throw InvalidArgument("attention.dropout_p",
                          "is for training calls: dense, or Sequences with variable lengths over "
                          "16-bit keys; not with pages, appended keys, an fp8 cache or head dims "
                          "past 256, where it must be 0");
  }
}

}  // namespace

InferenceTensors validate_inference_arguments(const Attention& a, const Sequences& s,
                                              const TensorView& q, const TensorView& k,
                                              const TensorView& v, const TensorView& o,
                                              const TensorView& lse) {
  validate_attention(a, /*wide_head_dims=*/true);
  check_no_fp8_descales(a);  // an fp8 cache's are sequences.k_descale and v_descale
  check_layout_choice(s);
  if (a.block_mask.data != nullptr) {
    throw InvalidArgument("attention.block_mask",
                          "is for the dense forward (Runtime::forward without Sequences) for now");
  }
  check_inference_dropout(a, s, k);
  const bool packed_q = present(s.cu_seqlens_q);
  const bool packed_k = present(s.cu_seqlens_k);
  const bool paged = present(s.page_table);
  if (packed_q)
    check_index_array(s.cu_seqlens_q, "sequences.cu_seqlens_q", {a.batch + 1}, "[batch + 1]");
  if (packed_k)
    check_index_array(s.cu_seqlens_k, "sequences.cu_seqlens_k", {a.batch + 1}, "[batch + 1]");
  if (present(s.seqlens_k))
    check_index_array(s.seqlens_k, "sequences.seqlens_k", {a.batch}, "[batch]");
  if (present(s.seqused_q))
    check_index_array(s.seqused_q, "sequences.seqused_q", {a.batch}, "[batch]");
  if (present(s.cache_batch_idx))
    check_index_array(s.cache_batch_idx, "sequences.cache_batch_idx", {a.batch}, "[batch]");
  if (present(s.cache_leftpad))
    check_index_array(s.cache_leftpad, "sequences.cache_leftpad", {a.batch}, "[batch]");
  if (paged) {
    // With cache_batch_idx the table has a row per cache row (any count), picked per sequence.
    check_tensor(s.page_table, "sequences.page_table", 2);
    const bool rows = present(s.cache_batch_idx);
    check_index_array(s.page_table, "sequences.page_table",
                      {rows ? s.page_table.shape[0] : a.batch, s.page_table.shape[1]},
                      rows ? "[cache_batch, max_pages]" : "[batch, max_pages]");
  }
  check_inference_dtypes(a, s, q, k, v, o);
  check_wide_call(a, k);

  InferenceTensors t;
  t.q = inference_query_tensor(q, "q", a, packed_q, -1);
  t.total_q = packed_q ? q.shape[0] : a.batch * a.seqlen_q;
  t.o = inference_query_tensor(o, "o", a, packed_q, t.total_q, true);
  if (paged) {
    check_pages(k, "k", a, false);
    check_pages(v, "v", a, true);
    check_shape(v, "v", {k.shape[0], k.shape[1], a.heads_kv, a.value_head_dim()},
                "k's [num_pages, page_size, heads_kv, ...]");
    t.k = k;
    t.v = v;
    t.num_pages = k.shape[0];
    t.page_size = k.shape[1];
    t.cache_rows = s.page_table.shape[0];
    if (a.seqlen_k > s.page_table.shape[1] * t.page_size) {
      throw InvalidArgument("attention.seqlen_k", "is " + str(a.seqlen_k) + "; a page table of " +
                                                      str(s.page_table.shape[1]) + " pages of " +
                                                      str(t.page_size) + " keys holds at most " +
                                                      str(s.page_table.shape[1] * t.page_size));
    }
  } else if (present(s.cache_batch_idx)) {
    // The cache's rows are the cache's own: any count, each sequence picking one.
    check_tensor(k, "k", 4);
    Attention rows = a;
    rows.batch = k.shape[0];
    t.k = inference_key_tensor(k, "k", rows, false, -1);
    t.v = inference_key_tensor(v, "v", rows, false, -1, true);
    t.cache_rows = k.shape[0];
  } else {
    t.k = inference_key_tensor(k, "k", a, packed_k, -1);
    t.v = inference_key_tensor(v, "v", a, packed_k, packed_k ? k.shape[0] : -1, true);
    t.cache_rows = packed_k ? 0 : a.batch;
  }
  if (present(lse)) t.lse = lse_view(lse, a, packed_q, t.total_q);
  check_outputs_disjoint(s, q, k, v, o, lse);
  t.seqlen_new = validate_append_arguments(a, s, t, q, o, lse);
  if (t.seqlen_new > 0 && present(s.rotary_cos)) t.rotary_positions = s.rotary_cos.shape[0];
  t.rotary_queries_advance = rotary_queries_advance(a, s);
  return t;
}

namespace {

/// Appending sequences write their rows: two sharing one would race, so each row is one
/// sequence's (FlashAttention leaves the winner unspecified; a refusal is what a caller can act
/// on).
void check_distinct_rows(const std::vector<std::int32_t>& rows) {
  std::vector<std::pair<std::int32_t, std::size_t>> sorted;
  for (std::size_t b = 0; b < rows.size(); ++b) sorted.emplace_back(rows[b], b);
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].first != sorted[i - 1].first) continue;
    throw InvalidArgument("sequences.cache_batch_idx",
                          "positions " + str(sorted[i - 1].second) + " and " +
                              str(sorted[i].second) + " both hold " + str(sorted[i].first) +
                              "; sequences that append (k_new) must have rows of their own");
  }
}

/// Sequence b's rows: its span in packed offsets `cu`, or `longest` with none (dense).
std::int64_t sequence_rows(const std::vector<std::int32_t>& cu, std::size_t b,
                           std::int64_t longest) {
  return cu.empty() ? longest : std::int64_t{cu[b + 1]} - cu[b];
}

}  // namespace

void check_index_values(const Attention& a, const InferenceTensors& t, const HostIndices& x) {
  const std::int64_t total_k = x.cu_seqlens_k.empty() ? 0 : t.k.shape[1];
  check_offsets(x.cu_seqlens_q, "sequences.cu_seqlens_q", a.seqlen_q, "attention.seqlen_q",
                t.total_q, "q");
  check_offsets(x.cu_seqlens_k, "sequences.cu_seqlens_k", a.seqlen_k, "attention.seqlen_k", total_k,
                "k");
  for (std::size_t b = 0; b < x.seqlens_k.size(); ++b) {
    // With an append, the cached count leaves room for the new keys.
    const std::int64_t packed = sequence_rows(x.cu_seqlens_k, b, a.seqlen_k) - t.seqlen_new;
    if (x.seqlens_k[b] < 0 || x.seqlens_k[b] > packed) {
      throw InvalidArgument("sequences.seqlens_k",
                            "position " + str(b) + " holds " + str(x.seqlens_k[b]) +
                                "; must be from 0 to " + str(packed) +
                                (t.seqlen_new > 0 ? " (attention.seqlen_k less the " +
                                                        str(t.seqlen_new) + " appended keys)"
                                 : x.cu_seqlens_k.empty() ? " (attention.seqlen_k)"
                                                          : " (the sequence's packed keys)"));
    }
  }
  for (std::size_t b = 0; b < x.seqlens_k.size() && t.rotary_positions > 0; ++b) {
    // The rows rotated past the cached count: the new keys, and the queries where they advance.
    const std::int64_t queries =
        t.rotary_queries_advance ? sequence_rows(x.cu_seqlens_q, b, a.seqlen_q) : 0;
    const std::int64_t reach = std::max(t.seqlen_new, queries);
    const std::int64_t last = x.seqlens_k[b] + reach - 1;  // the last position rotated
    if (last >= t.rotary_positions) {
      throw InvalidArgument(
          "sequences.rotary_cos.shape",
          "has " + str(t.rotary_positions) + " positions; sequence " + str(b) +
              " rotates rows up to position seqlens_k[" + str(b) + "] + " + str(reach - 1) + " = " +
              str(last) +
              (queries > t.seqlen_new ? " (a causal or windowed call's query i sits at the cached "
                                        "count + i)"
                                      : ""));
    }
  }
  for (std::size_t b = 0; b < x.seqused_q.size(); ++b) {
    const std::int64_t rows = sequence_rows(x.cu_seqlens_q, b, a.seqlen_q);
    if (x.seqused_q[b] < 0 || x.seqused_q[b] > rows) {
      throw InvalidArgument("sequences.seqused_q",
                            "position " + str(b) + " holds " + str(x.seqused_q[b]) +
                                "; must be from 0 to " + str(rows) +
                                (x.cu_seqlens_q.empty() ? " (attention.seqlen_q)"
                                                        : " (the sequence's packed queries)"));
    }
  }
  for (std::size_t b = 0; b < x.cache_leftpad.size(); ++b) {
    if (x.cache_leftpad[b] < 0 || x.cache_leftpad[b] > x.seqlens_k[b]) {
      throw InvalidArgument("sequences.cache_leftpad",
                            "position " + str(b) + " holds " + str(x.cache_leftpad[b]) +
                                "; must be from 0 to the sequence's key count seqlens_k[" + str(b) +
                                "] = " + str(x.seqlens_k[b]));
    }
  }
  for (std::size_t b = 0; b < x.cache_batch_idx.size(); ++b) {
    if (x.cache_batch_idx[b] < 0 || x.cache_batch_idx[b] >= t.cache_rows) {
      throw InvalidArgument("sequences.cache_batch_idx",
                            "position " + str(b) + " holds " + str(x.cache_batch_idx[b]) +
                                "; must be a row of the cache, from 0 to " + str(t.cache_rows - 1));
    }
  }
  if (t.seqlen_new > 0) check_distinct_rows(x.cache_batch_idx);
  if (x.page_table.empty()) return;
  for (std::size_t b = 0; b < x.seqlens_k.size(); ++b) {
    const std::int64_t used = (x.seqlens_k[b] + t.seqlen_new + t.page_size - 1) / t.page_size;
    const std::int64_t row = x.cache_batch_idx.empty() ? std::int64_t(b) : x.cache_batch_idx[b];
    for (std::int64_t p = 0; p < used; ++p) {
      const std::int32_t page = x.page_table[row * x.page_table_row + p];
      if (page < 0 || page >= t.num_pages) {
        throw InvalidArgument(
            "sequences.page_table",
            "position [" + str(row) + ", " + str(p) + "] holds " + str(page) +
                "; must be a page of k and v, from 0 to " + str(t.num_pages - 1) +
                (x.cache_batch_idx.empty() ? std::string()
                                           : " (sequence " + str(b) + "'s row, cache_batch_idx)"));
      }
    }
  }
}

}  // namespace flashjit::kernels
