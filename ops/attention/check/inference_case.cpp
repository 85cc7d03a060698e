#include "attention/check/inference_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "attention/check/attention_case.hpp"
#include "attention/check/dropout_mask.hpp"
#include "attention/check/rotary_reference.hpp"
#include "cases/case_inputs.hpp"

namespace flashjit::testing {
namespace {

using namespace case_inputs;  // rounding, upload, poison, widening

/// One sequence's own problem (batch 1): its inputs, reference and bound are a ForwardCase's.
ForwardCase sequence_case(const InferenceCase& c, std::size_t b) {
  ForwardCase f;
  f.problem = sequence_problem(c, b);
  f.dtype = c.dtype;
  f.seed = c.seed * 1000 + b * 3;
  return f;
}

/// Sequence b's batch row of a dense cache.
std::int64_t cache_row(const InferenceCase& c, std::int64_t b) {
  return c.cache_batch_idx ? static_cast<std::int64_t>(c.seqlens_k.size()) - b : b;
}

/// Where each sequence's keys go: the row of key j of sequence b in k's [rows, heads_kv,
/// head_dim] storage (dense, packed, or a page of the paged cache).
struct KeyPlacement {
  std::int64_t rows = 0;
  std::vector<std::int32_t> cu;          // packed
  std::vector<std::int32_t> page_table;  // paged: [batch, max_pages], -1 where unused
  std::int64_t max_pages = 0, num_pages = 0;

  KeyPlacement(const InferenceCase& c) {
    const auto n = static_cast<std::int64_t>(c.seqlens_k.size());
    if (c.keys == KeyStorage::dense) rows = table_rows(c) * c.capacity();
    if (c.keys == KeyStorage::packed) {
      cu = sequence_offsets(c.key_spans());
      rows = cu.back() + c.spare_rows;  // spare rows, poisoned like every row no key fills
    }
    if (c.keys != KeyStorage::paged) return;
    // Sequence b's keys sit at positions pad(b) onwards of its pages (the pad's pages hold
    // poison), in its cache row's entries of the table (row 0 spare with cache_batch_idx).
    const std::int64_t p = c.page_size;
    const auto pages_of = [&](std::int64_t b) {
      return (c.pad(static_cast<std::size_t>(b)) + c.seqlens_k[b] + p - 1) / p;
    };
    std::int64_t used = 0;
    for (std::int64_t b = 0; b < n; ++b) {
      max_pages = std::max<std::int64_t>({max_pages, 1, pages_of(b)});
      used += pages_of(b);
    }
    num_pages = used + 3;  // spare pages, poisoned: a read of one shows as NaN
    std::vector<std::int32_t> order(static_cast<std::size_t>(num_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(c.seed));
    page_table.assign(static_cast<std::size_t>(table_rows(c) * max_pages), -1);
    std::size_t next = 0;
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t q = 0; q < pages_of(b); ++q) {
        page_table[cache_row(c, b) * max_pages + q] = order[next++];
      }
    }
    rows = num_pages * p;
  }

  /// Rows of the dense cache or of the page table: one a sequence, and a spare row 0 with
  /// cache_batch_idx.
  static std::int64_t table_rows(const InferenceCase& c) {
    const auto n = static_cast<std::int64_t>(c.seqlens_k.size());
    return c.cache_batch_idx ? n + 1 : n;
  }

  std::int64_t row(const InferenceCase& c, std::int64_t b, std::int64_t j) const {
    switch (c.keys) {
      case KeyStorage::dense:
        return cache_row(c, b) * c.capacity() + c.pad(static_cast<std::size_t>(b)) + j;
      case KeyStorage::packed:
        return cu[b] + j;
      case KeyStorage::paged: {
        const std::int64_t position = c.pad(static_cast<std::size_t>(b)) + j;
        return std::int64_t{page_table[cache_row(c, b) * max_pages + position / c.page_size]} *
                   c.page_size +
               position % c.page_size;
      }
    }
    return 0;
  }
};

/// One sequence's judged outputs: O's relative L2 error against its bound, LSE within 1e-4.
struct SequenceCheck {
  double ratio = 0;
  std::string failure;
};

SequenceCheck check_sequence(const ForwardCase& f, const std::vector<double>& out,
                             const std::vector<float>& lse, const std::vector<double>& expected_out,
                             const std::vector<double>& expected_lse) {
  SequenceCheck result;
  if (f.problem.seqlen_k == 0) {  // no key: O = 0 and LSE = -inf exactly
    for (double x : out) {
      if (x != 0) result.failure = "O is not 0 for a sequence without keys";
    }
    for (float x : lse) {
      if (x != -std::numeric_limits<float>::infinity()) {
        result.failure = "LSE is not -inf for a sequence without keys";
      }
    }
    return result;
  }
  const double bound = std::max(2 * plain_attention_error(f), 1e-6);
  const reference::CheckResult o = reference::check_close(out, expected_out, bound, "O");
  const reference::CheckResult l = reference::check_close(lse, expected_lse, 1e-4, "LSE");
  result.ratio = o.rel_l2 / bound;
  if (!o.ok) result.failure = o.describe();
  if (!l.ok) result.failure += l.describe();
  return result;
}

/// Refuses a case the runner cannot lay out.
void check_case(const InferenceCase& c) {
  if (c.seqlens_k.size() != c.seqlens_q.size()) {
    throw std::invalid_argument("an inference case needs one key length per sequence");
  }
  const std::vector<std::int64_t> spans = c.query_spans();
  if (!c.packed_q && longest_length(spans) != *std::min_element(spans.begin(), spans.end())) {
    throw std::invalid_argument("dense queries need one span for every sequence; pack them");
  }
  for (const auto* unused : {&c.unused_q, &c.unused_k}) {
    if (!unused->empty() && unused->size() != c.seqlens_q.size()) {
      throw std::invalid_argument("an inference case needs one unused count per sequence");
    }
  }
  if ((!c.unused_q.empty() || !c.unused_k.empty()) &&
      (c.append > 0 || c.keys == KeyStorage::paged || !c.leftpad.empty() || c.cache_batch_idx)) {
    throw std::invalid_argument("unused rows come without appends, pages, pads or cache rows");
  }
  if (c.rotary && c.append == 0) {
    throw std::invalid_argument("rotary embedding comes with an append");
  }
  if (c.values_in_keys && (c.append > 0 || c.kv_e4m3)) {
    throw std::invalid_argument("values in the keys come without appends or an fp8 cache");
  }
  if ((!c.leftpad.empty() || c.cache_batch_idx) && c.keys == KeyStorage::packed) {
    throw std::invalid_argument("left pads and cache rows index a dense or paged cache");
  }
  if (!c.leftpad.empty() && c.leftpad.size() != c.seqlens_k.size()) {
    throw std::invalid_argument("an inference case needs one left pad per sequence");
  }
  if (c.append == 0) return;
  if (c.keys == KeyStorage::packed) {
    throw std::invalid_argument("an appending case has a dense or paged cache");
  }
  if (*std::min_element(c.seqlens_k.begin(), c.seqlens_k.end()) < c.append) {
    throw std::invalid_argument("every sequence of an appending case has its appended keys");
  }
}

/// Keys sequence b has in the cache before the call.
std::int64_t cached_keys(const InferenceCase& c, std::size_t b) {
  return c.seqlens_k[b] - c.append;
}

/// The case's rotary tables (none without rotary): RoPE over the seqlen_k positions, or past
/// them as far as a causal or windowed call's queries reach (query i at the cached count + i,
/// past the new keys when there are more queries than them).
reference::RotaryTables rotary_tables(const InferenceCase& c) {
  if (!c.rotary) return {};
  std::int64_t positions = c.capacity();
  if (c.causal || c.window_left >= 0) {
    for (std::size_t b = 0; b < c.seqlens_k.size(); ++b) {
      positions = std::max(positions, c.pad(b) + c.seqlens_k[b] - c.append + c.seqlens_q[b]);
    }
  }
  return reference::rope_tables(positions, c.rotary_dim > 0 ? c.rotary_dim : c.head_dim);
}

/// Where each sequence's queries go: rows of q's [total, heads_q, head_dim] storage, packed by
/// cu_seqlens_q or one block of the (single) length per sequence.
struct QueryRows {
  bool packed = false;
  std::vector<std::int32_t> cu;  // packed only
  std::int64_t seqlen = 0;       // dense: every sequence's length
  std::int64_t total = 0;

  explicit QueryRows(const InferenceCase& c)
      : packed(c.packed_q),
        cu(c.packed_q ? sequence_offsets(c.query_spans()) : std::vector<std::int32_t>{}),
        seqlen(longest_length(c.query_spans())),
        total(c.packed_q ? cu.back() : static_cast<std::int64_t>(c.seqlens_q.size()) * seqlen) {}

  std::int64_t first(std::int64_t b) const { return packed ? cu[b] : b * seqlen; }
};

/// One sequence's random inputs, from its ForwardCase's seeds.
struct SequenceInputs {
  RoundedTensor q, k, v;
};
SequenceInputs sequence_inputs(const ForwardCase& f) {
  const reference::Problem& p = f.problem;
  const auto bshd = reference::Layout::bshd;
  return {rounded_random(p.q_shape(), bshd, f.seed, f.dtype),
          rounded_random(p.kv_shape(), bshd, f.seed + 1, f.dtype),
          rounded_random(p.v_shape(), bshd, f.seed + 2, f.dtype)};
}

/// Sequence b's inputs as the case stores them: with an fp8 cache, k and v quantized to e4m3
/// under their heads' descale factors (bits: the codes; values: the codes' exact values times
/// the factors, which is what the attention sees).
SequenceInputs stored_inputs(const InferenceCase& c, const ForwardCase& f, std::size_t b) {
  SequenceInputs in = sequence_inputs(f);
  if (c.values_in_keys) {  // each (key, head) row's value is its key's first columns
    const std::int64_t d = c.head_dim, dv = c.value_dim();
    const auto rows = static_cast<std::int64_t>(in.k.bits.size()) / d;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t e = 0; e < dv; ++e) {
        const auto from = static_cast<std::size_t>(r * d + e),
                   to = static_cast<std::size_t>(r * dv + e);
        in.v.bits[to] = in.k.bits[from];
        in.v.values.values[to] = in.k.values.values[from];
      }
    }
  }
  if (!c.kv_e4m3) return in;
  const auto quantize = [&](RoundedTensor& t, std::int64_t dim, bool value) {
    for (std::size_t e = 0; e < t.values.values.size(); ++e) {
      const auto head = static_cast<std::int64_t>(e) / dim % c.heads_kv;
      const float descale = c.descale_of(value, static_cast<std::int64_t>(b), head);
      const std::uint8_t code =
          e4m3_bits_from_float(static_cast<float>(t.values.values[e] / descale));
      t.bits[e] = code;
      t.values.values[e] = double(float_from_e4m3_bits(code)) * descale;
    }
  };
  quantize(in.k, c.head_dim, false);
  quantize(in.v, c.value_dim(), true);
  return in;
}

/// What sequence b's attention sees: its inputs with, under rotary, q and the appended keys
/// rotated in float64 and rounded to the dtype (the cached keys count as rotated already). The
/// query position is FlashAttention's: cached + i when causal or windowed, else cached.
SequenceInputs attended_inputs(const InferenceCase& c, const ForwardCase& f, std::size_t b,
                               const reference::RotaryTables& tables) {
  SequenceInputs in = stored_inputs(c, f, b);
  if (!c.rotary) return in;
  const std::int64_t cached = cached_keys(c, b), pad = c.pad(b);  // positions count the pad
  const bool advance = c.causal || c.window_left >= 0;
  const auto round_all = [&](reference::Tensor4& t) {
    for (double& x : t.values) x = case_inputs::round_to(c.dtype, x);
  };
  for (std::int64_t i = 0; i < f.problem.seqlen_q; ++i) {
    for (std::int64_t h = 0; h < c.heads_q; ++h) {
      reference::rotate_row(in.q.values.view(), 0, i, h, tables, pad + cached + (advance ? i : 0),
                            c.rotary_interleaved);
    }
  }
  for (std::int64_t j = cached; j < f.problem.seqlen_k; ++j) {
    for (std::int64_t h = 0; h < c.heads_kv; ++h) {
      reference::rotate_row(in.k.values.view(), 0, j, h, tables, pad + j, c.rotary_interleaved);
    }
  }
  round_all(in.q.values);
  if (!c.kv_e4m3) {
    round_all(in.k.values);
    return in;
  }
  // An fp8 cache keeps the rotated new keys as codes in its scale: the value is its code's
  // (the rotated code rounded to e4m3) times the head's factor.
  const std::int64_t row = c.heads_kv * c.head_dim;
  for (std::int64_t e = cached * row; e < f.problem.seqlen_k * row; ++e) {
    const float descale =
        c.descale_of(false, static_cast<std::int64_t>(b), e / c.head_dim % c.heads_kv);
    double& value = in.k.values.values[static_cast<std::size_t>(e)];
    const std::uint8_t code = e4m3_bits_from_float(static_cast<float>(value / descale));
    value = double(float_from_e4m3_bits(code)) * descale;
  }
  return in;
}

/// The whole case's inputs as the runtime takes them (key rows no sequence uses stay NaN, as do
/// the cache's rows for appended keys, which arrive in k_new and v_new [batch, append, heads_kv,
/// head_dim]), and each sequence's own case.
struct HostInputs {
  std::vector<std::uint16_t> q, k, v, k_new, v_new;
  std::vector<ForwardCase> cases;
};
HostInputs make_inputs(const InferenceCase& c, const QueryRows& rows, const KeyPlacement& keys) {
  const std::int64_t h = c.heads_q, hk = c.heads_kv, d = c.head_dim, dv = c.value_dim();
  HostInputs in;
  // Unused query rows are NaN: a read of one shows.
  in.q.assign(static_cast<std::size_t>(rows.total * h * d), c.unused_q.empty() ? 0 : kPoison);
  // e4m3 has no NaN the kernels keep (they read its pattern as 480): its poison is 448, which
  // shows in any result that reads it.
  const std::uint16_t poison = c.kv_e4m3 ? std::uint16_t{0x7E} : kPoison;
  in.k.assign(static_cast<std::size_t>(keys.rows * hk * d), poison);
  in.v.assign(static_cast<std::size_t>(keys.rows * hk * dv), poison);
  const auto n = static_cast<std::int64_t>(c.seqlens_q.size());
  in.k_new.assign(static_cast<std::size_t>(n * c.append * hk * d), 0);
  in.v_new.assign(static_cast<std::size_t>(n * c.append * hk * dv), 0);
  for (std::int64_t b = 0; b < n; ++b) {
    in.cases.push_back(sequence_case(c, static_cast<std::size_t>(b)));
    const SequenceInputs s = stored_inputs(c, in.cases.back(), static_cast<std::size_t>(b));
    std::copy(s.q.bits.begin(), s.q.bits.end(), in.q.begin() + rows.first(b) * h * d);
    const std::int64_t cached = cached_keys(c, static_cast<std::size_t>(b));
    for (std::int64_t j = 0; j < in.cases.back().problem.seqlen_k; ++j) {
      const bool appended = j >= cached;
      const std::int64_t row = appended ? b * c.append + (j - cached) : keys.row(c, b, j);
      std::copy_n(s.k.bits.begin() + j * hk * d, hk * d,
                  (appended ? in.k_new : in.k).begin() + row * hk * d);
      std::copy_n(s.v.bits.begin() + j * hk * dv, hk * dv,
                  (appended ? in.v_new : in.v).begin() + row * hk * dv);
    }
  }
  return in;
}

/// The case's tensors on the runtime's device, outputs poisoned.
struct DeviceTensors {
  DeviceBuffer q, k, v, o, lse, cu_q, cu_k, seqlens_k, page_table, k_new, v_new, cos, sin, leftpad,
      cache_rows, k_descale, v_descale, seqused_q;
};
/// The cache's elements on the device: 16-bit, or an fp8 cache's bytes.
DeviceBuffer upload_cache(Runtime& runtime, const InferenceCase& c,
                          const std::vector<std::uint16_t>& bits) {
  if (!c.kv_e4m3) return upload(runtime, bits);
  return upload(runtime, std::vector<std::uint8_t>(bits.begin(), bits.end()));
}
/// A view of an fp8 cache's descale factors at `data` in the case's shape: [1], [heads_kv] or
/// [batch, heads_kv].
TensorView descale_view(const InferenceCase& c, void* data) {
  using Descale = InferenceCase::Descale;
  if (c.descale == Descale::per_tensor) return TensorView::contiguous(data, DType::f32, {1});
  if (c.descale == Descale::per_head) return TensorView::contiguous(data, DType::f32, {c.heads_kv});
  const auto n = static_cast<std::int64_t>(c.seqlens_k.size());
  return TensorView::contiguous(data, DType::f32, {n, c.heads_kv});
}
/// An fp8 cache's descale factors, in descale_view's shape.
std::vector<float> descale_factors(const InferenceCase& c, bool value) {
  const TensorView shape = descale_view(c, nullptr);
  const std::int64_t rows = shape.rank == 2 ? shape.shape[0] : 1;
  std::vector<float> factors;
  for (std::int64_t b = 0; b < rows; ++b) {
    for (std::int64_t h = 0; h < shape.shape[shape.rank - 1]; ++h) {
      factors.push_back(c.descale_of(value, b, h));
    }
  }
  return factors;
}
DeviceTensors upload_tensors(Runtime& runtime, const InferenceCase& c, const QueryRows& rows,
                             const KeyPlacement& keys, const HostInputs& in,
                             const reference::RotaryTables& tables) {
  // The cached counts (all of them without an append), from the cache row's start.
  std::vector<std::int32_t> seqlens_k, leftpad, cache_rows;
  for (std::size_t b = 0; b < c.seqlens_k.size(); ++b) {
    seqlens_k.push_back(static_cast<std::int32_t>(c.pad(b) + cached_keys(c, b)));
    leftpad.push_back(static_cast<std::int32_t>(c.pad(b)));
    cache_rows.push_back(static_cast<std::int32_t>(cache_row(c, static_cast<std::int64_t>(b))));
  }
  return {upload(runtime, in.q),
          upload_cache(runtime, c, in.k),
          upload_cache(runtime, c, in.v),
          upload(runtime,
                 std::vector<std::uint16_t>(
                     static_cast<std::size_t>(rows.total * c.heads_q * c.value_dim()), kPoison)),
          upload(runtime, std::vector<float>(static_cast<std::size_t>(rows.total * c.heads_q),
                                             std::numeric_limits<float>::quiet_NaN())),
          upload(runtime, or_zero(rows.cu)),
          upload(runtime, or_zero(keys.cu)),
          upload(runtime, or_zero(seqlens_k)),
          upload(runtime, or_zero(keys.page_table)),
          upload_cache(runtime, c, or_zero(in.k_new)),
          upload_cache(runtime, c, or_zero(in.v_new)),
          upload(runtime, or_zero(tables.cos)),
          upload(runtime, or_zero(tables.sin)),
          upload(runtime, or_zero(leftpad)),
          upload(runtime, or_zero(cache_rows)),
          upload(runtime, descale_factors(c, false)),
          upload(runtime, descale_factors(c, true)),
          upload(runtime, or_zero(int32_values(c.seqlens_q)))};
}

/// The views of one forward call: q, o and LSE dense or packed; k and v dense, packed or paged,
/// with the index arrays their layout needs.
struct ForwardViews {
  TensorView q, k, v, o, lse;
  Sequences sequences;
};
void set_query_views(const InferenceCase& c, const QueryRows& rows, DeviceTensors& t,
                     ForwardViews& views) {
  const std::int64_t n = static_cast<std::int64_t>(c.seqlens_q.size()), h = c.heads_q,
                     d = c.head_dim, dv = c.value_dim();
  if (!c.unused_q.empty()) {
    views.sequences.seqused_q = TensorView::contiguous(t.seqused_q.data(), DType::i32, {n});
  }
  if (rows.packed) {
    views.sequences.cu_seqlens_q = TensorView::contiguous(t.cu_q.data(), DType::i32, {n + 1});
    views.q = TensorView::contiguous(t.q.data(), c.dtype, {rows.total, h, d});
    views.o = TensorView::contiguous(t.o.data(), c.dtype, {rows.total, h, dv});
    views.lse = TensorView::contiguous(t.lse.data(), DType::f32, {h, rows.total});
    return;
  }
  views.q = TensorView::contiguous(t.q.data(), c.dtype, {n, rows.seqlen, h, d});
  views.o = TensorView::contiguous(t.o.data(), c.dtype, {n, rows.seqlen, h, dv});
  views.lse = TensorView::contiguous(t.lse.data(), DType::f32, {n, h, rows.seqlen});
}
void set_key_views(const InferenceCase& c, const KeyPlacement& keys, DeviceTensors& t,
                   ForwardViews& views) {
  const std::int64_t n = static_cast<std::int64_t>(c.seqlens_k.size()), hk = c.heads_kv,
                     d = c.head_dim, dv = c.value_dim();
  Sequences& s = views.sequences;
  const DType kv = c.kv_dtype();
  if (c.kv_e4m3) {
    s.k_descale = descale_view(c, t.k_descale.data());
    s.v_descale = descale_view(c, t.v_descale.data());
  }
  if (c.keys == KeyStorage::paged) {
    views.k = TensorView::contiguous(t.k.data(), kv, {keys.num_pages, c.page_size, hk, d});
    views.v = TensorView::contiguous(t.v.data(), kv, {keys.num_pages, c.page_size, hk, dv});
    s.page_table = TensorView::contiguous(t.page_table.data(), DType::i32,
                                          {KeyPlacement::table_rows(c), keys.max_pages});
    s.seqlens_k = TensorView::contiguous(t.seqlens_k.data(), DType::i32, {n});
  } else if (c.keys == KeyStorage::packed) {
    views.k = TensorView::contiguous(t.k.data(), kv, {keys.rows, hk, d});
    views.v = TensorView::contiguous(t.v.data(), kv, {keys.rows, hk, dv});
    s.cu_seqlens_k = TensorView::contiguous(t.cu_k.data(), DType::i32, {n + 1});
    if (!c.unused_k.empty())
      s.seqlens_k = TensorView::contiguous(t.seqlens_k.data(), DType::i32, {n});
  } else {
    const std::int64_t longest = c.capacity(), rows = KeyPlacement::table_rows(c);
    views.k = TensorView::contiguous(t.k.data(), kv, {rows, longest, hk, d});
    views.v = TensorView::contiguous(t.v.data(), kv, {rows, longest, hk, dv});
    const bool one_length = longest == *std::min_element(c.seqlens_k.begin(), c.seqlens_k.end());
    // Keys of one length need no index array at all (a dense batch, decoded or split).
    if (!one_length || !c.leftpad.empty() || c.cache_batch_idx) {
      s.seqlens_k = TensorView::contiguous(t.seqlens_k.data(), DType::i32, {n});
    }
  }
  if (!c.leftpad.empty()) {
    s.cache_leftpad = TensorView::contiguous(t.leftpad.data(), DType::i32, {n});
  }
  if (c.cache_batch_idx) {
    s.cache_batch_idx = TensorView::contiguous(t.cache_rows.data(), DType::i32, {n});
  }
  if (c.values_in_keys) {  // v: k's first dv columns, k's strides
    views.v = views.k;
    views.v.shape[views.v.rank - 1] = dv;
  }
}
void set_append_views(const InferenceCase& c, const reference::RotaryTables& tables,
                      DeviceTensors& t, ForwardViews& views) {
  if (c.append == 0) return;
  const std::int64_t n = static_cast<std::int64_t>(c.seqlens_k.size());
  Sequences& s = views.sequences;
  s.seqlens_k = TensorView::contiguous(t.seqlens_k.data(), DType::i32, {n});
  // In the cache's type: an fp8 cache's new rows are codes in its scale.
  s.k_new =
      TensorView::contiguous(t.k_new.data(), c.kv_dtype(), {n, c.append, c.heads_kv, c.head_dim});
  s.v_new = TensorView::contiguous(t.v_new.data(), c.kv_dtype(),
                                   {n, c.append, c.heads_kv, c.value_dim()});
  if (!c.rotary) return;
  s.rotary_cos = TensorView::contiguous(t.cos.data(), DType::f32, {tables.positions, tables.pairs});
  s.rotary_sin = TensorView::contiguous(t.sin.data(), DType::f32, {tables.positions, tables.pairs});
  s.rotary_interleaved = c.rotary_interleaved;
}

/// O and LSE as the forward wrote them, and the cache it leaves.
struct Outputs {
  std::vector<std::uint16_t> o;
  std::vector<float> lse;
  std::vector<std::uint16_t> k, v;
};
Outputs run_forward(Runtime& runtime, const InferenceCase& c, const QueryRows& rows,
                    const KeyPlacement& keys, const HostInputs& in,
                    const reference::RotaryTables& tables) {
  DeviceTensors tensors = upload_tensors(runtime, c, rows, keys, in, tables);
  ForwardViews views;
  views.sequences.splits = c.splits;
  set_query_views(c, rows, tensors, views);
  set_key_views(c, keys, tensors, views);
  set_append_views(c, tables, tensors, views);
  runtime.forward(c.attention(), views.sequences, views.q, views.k, views.v, views.o, views.lse);
  runtime.synchronize();
  Outputs out{std::vector<std::uint16_t>(tensors.o.size() / 2),
              std::vector<float>(static_cast<std::size_t>(rows.total * c.heads_q)),
              std::vector<std::uint16_t>(in.k.size()), std::vector<std::uint16_t>(in.v.size())};
  runtime.copy_to_host(out.o.data(), tensors.o.data(), out.o.size() * 2);
  runtime.copy_to_host(out.lse.data(), tensors.lse.data(), out.lse.size() * 4);
  if (c.append > 0) {  // the cache it leaves, an fp8 cache's bytes widened
    for (auto [device, host] : {std::pair{&tensors.k, &out.k}, std::pair{&tensors.v, &out.v}}) {
      if (!c.kv_e4m3) {
        runtime.copy_to_host(host->data(), device->data(), host->size() * 2);
        continue;
      }
      std::vector<std::uint8_t> bytes(host->size());
      runtime.copy_to_host(bytes.data(), device->data(), bytes.size());
      std::copy(bytes.begin(), bytes.end(), host->begin());
    }
  }
  return out;
}

/// Sequence b's LSE, [heads_q, its queries], out of the whole case's.
std::vector<float> sequence_lse(const InferenceCase& c, const QueryRows& rows,
                                const std::vector<float>& lse, std::int64_t b, std::int64_t lq) {
  std::vector<float> lse_rows;
  for (std::int64_t head = 0; head < c.heads_q; ++head) {
    for (std::int64_t i = 0; i < lq; ++i) {
      const std::int64_t at = rows.packed ? head * rows.total + rows.first(b) + i
                                          : (b * c.heads_q + head) * rows.seqlen + i;
      lse_rows.push_back(lse[static_cast<std::size_t>(at)]);
    }
  }
  return lse_rows;
}

/// The rows of sequence b past its lq used queries: O 0 and LSE -inf; "" when they are.
std::string check_unused_queries(const InferenceCase& c, const QueryRows& rows,
                                 const Outputs& outputs, std::int64_t b, std::int64_t lq) {
  const std::int64_t span = c.query_span(static_cast<std::size_t>(b));
  const std::int64_t hd = c.heads_q * c.value_dim();
  for (std::int64_t e = (rows.first(b) + lq) * hd; e < (rows.first(b) + span) * hd; ++e) {
    if (outputs.o[static_cast<std::size_t>(e)] != 0) {
      return "O's unused row " + std::to_string(e / hd - rows.first(b)) + " holds bits " +
             std::to_string(outputs.o[static_cast<std::size_t>(e)]) + "; expected 0";
    }
  }
  const std::vector<float> all = sequence_lse(c, rows, outputs.lse, b, span);
  for (std::int64_t head = 0; head < c.heads_q; ++head) {
    for (std::int64_t i = lq; i < span; ++i) {
      const float x = all[static_cast<std::size_t>(head * span + i)];
      if (x != -std::numeric_limits<float>::infinity()) {
        return "LSE of unused row " + std::to_string(i) + " is " + std::to_string(x) +
               "; expected -inf";
      }
    }
  }
  return "";
}

/// Each sequence's O and LSE against its own float64 reference.
InferenceVerdict judge(const InferenceCase& c, const QueryRows& rows,
                       const std::vector<ForwardCase>& cases, const Outputs& outputs,
                       const reference::RotaryTables& tables) {
  const std::int64_t hd = c.heads_q * c.value_dim();  // O's row
  InferenceVerdict verdict;
  verdict.out = widen(c.dtype, outputs.o);
  for (std::int64_t b = 0; b < static_cast<std::int64_t>(cases.size()); ++b) {
    const ForwardCase& f = cases[static_cast<std::size_t>(b)];
    const std::int64_t lq = f.problem.seqlen_q;
    const std::string unused = check_unused_queries(c, rows, outputs, b, lq);
    if (!unused.empty() && verdict.first_failure.empty()) {
      verdict.first_failure = "sequence " + std::to_string(b) + ": " + unused;
    }
    if (lq == 0) continue;
    const std::vector<double> out(verdict.out.begin() + rows.first(b) * hd,
                                  verdict.out.begin() + (rows.first(b) + lq) * hd);
    std::vector<double> expected_out, expected_lse;
    if (f.problem.seqlen_k > 0) {
      const SequenceInputs in = attended_inputs(c, f, static_cast<std::size_t>(b), tables);
      reference::ForwardResult r =
          reference::forward(f.problem, in.q.values.view(), in.k.values.view(), in.v.values.view());
      expected_out = std::move(r.out.values);
      expected_lse = std::move(r.lse);
    }
    const SequenceCheck check = check_sequence(f, out, sequence_lse(c, rows, outputs.lse, b, lq),
                                               expected_out, expected_lse);
    verdict.worst_ratio = std::max(verdict.worst_ratio, check.ratio);
    if (!check.failure.empty() && verdict.first_failure.empty()) {
      verdict.first_failure = "sequence " + std::to_string(b) + ": " + check.failure;
    }
  }
  verdict.ok = verdict.first_failure.empty();
  return verdict;
}

/// The cache an appending call leaves against what it should hold: each sequence's appended
/// rows (k: the rotated keys, one unit in the last place allowed for fp32 against float64
/// rounding; v: the new values bit for bit), every other row as it was. "" when it does.
std::string check_cache(const InferenceCase& c, const KeyPlacement& keys, const HostInputs& in,
                        const Outputs& out, const reference::RotaryTables& tables) {
  const std::int64_t row_elements = c.heads_kv * c.head_dim;
  const std::int64_t value_elements = c.heads_kv * c.value_dim();
  std::vector<std::uint16_t> expected_k = in.k, expected_v = in.v;
  for (std::size_t b = 0; b < c.seqlens_k.size(); ++b) {
    const SequenceInputs attended = attended_inputs(c, in.cases[b], b, tables);
    const SequenceInputs raw = stored_inputs(c, in.cases[b], b);  // v_new as the call got it
    for (std::int64_t j = cached_keys(c, b); j < c.seqlens_k[b]; ++j) {
      const std::int64_t row = keys.row(c, static_cast<std::int64_t>(b), j);
      for (std::int64_t e = 0; e < row_elements; ++e) {
        const auto at = static_cast<std::size_t>(row * row_elements + e);
        const double value =
            attended.k.values.values[static_cast<std::size_t>(j * row_elements + e)];
        // An fp8 cache holds the code: the value over its head's factor.
        const float descale =
            c.kv_e4m3 ? c.descale_of(false, static_cast<std::int64_t>(b), e / c.head_dim) : 1.0f;
        expected_k[at] = c.kv_e4m3 ? e4m3_bits_from_float(static_cast<float>(value / descale))
                                   : case_inputs::to_bits(c.dtype, value);
      }
      for (std::int64_t e = 0; e < value_elements; ++e) {
        expected_v[static_cast<std::size_t>(row * value_elements + e)] =
            raw.v.bits[static_cast<std::size_t>(j * value_elements + e)];
      }
    }
  }
  for (std::size_t i = 0; i < std::max(expected_k.size(), expected_v.size()); ++i) {
    const bool k_bad =
        i < expected_k.size() && std::abs(int(out.k[i]) - int(expected_k[i])) > (c.rotary ? 1 : 0);
    if (k_bad || (i < expected_v.size() && out.v[i] != expected_v[i])) {
      return "cache: element " + std::to_string(i) + " of " + (k_bad ? "k" : "v") + " holds bits " +
             std::to_string(k_bad ? out.k[i] : out.v[i]) + "; expected " +
             std::to_string(k_bad ? expected_k[i] : expected_v[i]);
    }
  }
  return "";
}

}  // namespace

reference::Problem sequence_problem(const InferenceCase& c, std::size_t b) {
  reference::Problem p{.batch = 1,
                       .heads_q = c.heads_q,
                       .heads_kv = c.heads_kv,
                       .seqlen_q = c.seqlens_q[b],
                       .seqlen_k = c.seqlens_k[b],
                       .head_dim = c.head_dim,
                       .head_dim_v = c.head_dim_v,
                       .causal = c.causal,
                       .window_left = c.window_left,
                       .softcap = c.softcap};
  // The reference's problem is the sequence alone (batch 1); the modifiers see its index.
  const auto batch = static_cast<std::int64_t>(b);
  if (c.score_mod) {
    p.score_mod_text = c.score_mod_text;
    p.score_mod = [f = c.score_mod, batch](double s, std::int64_t, std::int64_t h, std::int64_t i,
                                           std::int64_t j) { return f(s, batch, h, i, j); };
  }
  if (c.score_mod_slope) {
    p.score_mod_slope = [f = c.score_mod_slope, batch](double s, std::int64_t, std::int64_t h,
                                                       std::int64_t i, std::int64_t j) {
      return f(s, batch, h, i, j);
    };
  }
  if (c.mask_mod) {
    p.mask_mod_text = c.mask_mod_text;
    p.mask_mod = [f = c.mask_mod, batch](std::int64_t, std::int64_t h, std::int64_t i,
                                         std::int64_t j) { return f(batch, h, i, j); };
  }
  if (c.dropout_p > 0.0f) set_dropout(p, c.dropout_p, c.dropout_seed, c.dropout_offset, batch);
  return p;
}

std::vector<std::int32_t> sequence_offsets(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int32_t> cu(lengths.size() + 1, 0);
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    cu[b + 1] = cu[b] + static_cast<std::int32_t>(lengths[b]);
  }
  return cu;
}

std::int64_t longest_length(const std::vector<std::int64_t>& lengths) {
  return lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
}

std::string InferenceCase::name() const {
  std::ostringstream os;
  const auto list = [&](const char* label, const std::vector<std::int64_t>& values) {
    os << label << '[';
    for (std::size_t i = 0; i < values.size(); ++i) os << (i ? "," : "") << values[i];
    os << ']';
  };
  os << 'n' << seqlens_q.size() << '.';
  list("q", seqlens_q);
  os << '.';
  list("k", seqlens_k);
  os << ".hq" << heads_q << ".hkv" << heads_kv << ".d" << head_dim
     << (head_dim_v != 0 ? "v" + std::to_string(head_dim_v) : "") << '.' << dtype_name(dtype)
     << (packed_q ? ".packedq" : "")
     << (keys == KeyStorage::packed  ? ".packedk"
         : keys == KeyStorage::paged ? ".paged" + std::to_string(page_size)
                                     : "")
     << (causal ? ".causal" : "") << (window_left >= 0 ? ".left" + std::to_string(window_left) : "")
     << (softcap > 0 ? ".softcap" : "") << ".split" << splits
     << (deterministic ? ".deterministic" : "")
     << (spare_rows > 0 ? ".spare" + std::to_string(spare_rows) : "")
     << (unused_q.empty() ? "" : ".seqused_q") << (unused_k.empty() ? "" : ".seqused_k")
     << (append > 0 ? ".append" + std::to_string(append) : "")
     << (rotary ? (rotary_interleaved ? ".rope_interleaved" : ".rope_half") : "")
     << (rotary && rotary_dim > 0 ? std::to_string(rotary_dim) : "")
     << (leftpad.empty() ? "" : ".leftpad") << (cache_batch_idx ? ".cacherows" : "")
     << (values_in_keys ? ".values_in_keys" : "") << (score_mod_text.empty() ? "" : ".scoremod")
     << (mask_mod_text.empty() ? "" : ".maskmod") << (dropout_p > 0.0f ? ".dropout" : "")
     << (!kv_e4m3                         ? ""
         : descale == Descale::per_tensor ? ".kv_e4m3.descale_tensor"
         : descale == Descale::per_head   ? ".kv_e4m3.descale_head"
                                          : ".kv_e4m3.descale_sequence")
     << ".seed" << seed;
  return os.str();
}

Attention InferenceCase::attention() const {
  Attention a;
  a.batch = static_cast<std::int64_t>(seqlens_q.size());
  a.heads_q = heads_q;
  a.heads_kv = heads_kv;
  a.seqlen_q = longest_length(query_spans());
  a.seqlen_k = capacity();
  a.head_dim = head_dim;
  a.head_dim_v = head_dim_v;
  a.causal = causal;
  a.window_left = window_left;
  a.softcap = static_cast<float>(softcap);
  a.deterministic = deterministic;
  a.score_mod = score_mod_text;
  a.mask_mod = mask_mod_text;
  a.dropout_p = dropout_p;
  a.dropout_seed = dropout_seed;
  a.dropout_offset = dropout_offset;
  return a;
}

float InferenceCase::descale_of(bool value, std::int64_t b, std::int64_t h) const {
  // Factors that put the unit-scale inputs well inside e4m3's range (448), different for k and
  // v, per head and per sequence where the shape has them. Powers of two, so that a dequantized
  // value is exact in the dtype, as the reference's inputs are without a cache in fp8: else a
  // sequence of one key (O = its value, which plain attention gets exactly) could not meet the
  // dtype's bound for O's final rounding alone. A factor taken from the wrong head, sequence or
  // tensor is still off by a power of two.
  const int head = descale == Descale::per_tensor ? 0 : static_cast<int>(h % 3);
  const int sequence = descale == Descale::per_sequence ? static_cast<int>(b % 2) : 0;
  return std::ldexp(1.0f, -(value ? 6 : 5) - head - 2 * sequence);
}

std::vector<std::int64_t> InferenceCase::query_spans() const {
  std::vector<std::int64_t> spans;
  for (std::size_t b = 0; b < seqlens_q.size(); ++b) spans.push_back(query_span(b));
  return spans;
}

std::vector<std::int64_t> InferenceCase::key_spans() const {
  std::vector<std::int64_t> spans;
  for (std::size_t b = 0; b < seqlens_k.size(); ++b) spans.push_back(key_span(b));
  return spans;
}

std::int64_t InferenceCase::capacity() const {
  std::int64_t longest = 0;
  for (std::size_t b = 0; b < seqlens_k.size(); ++b) {
    longest = std::max(longest, key_span(b) + pad(b));
  }
  return longest;
}

InferenceCase random_lengths_case(int sequences, std::int64_t max_q, std::int64_t max_k,
                                  std::uint64_t seed) {
  InferenceCase c;
  std::mt19937_64 random(seed);
  for (int b = 0; b < sequences; ++b) {
    c.seqlens_q.push_back(std::uniform_int_distribution<std::int64_t>(0, max_q)(random));
    c.seqlens_k.push_back(std::uniform_int_distribution<std::int64_t>(0, max_k)(random));
  }
  if (sequences >= 2) {
    c.seqlens_q[0] = 1;
    c.seqlens_k[0] = 1;
  }
  if (sequences >= 3) {
    c.seqlens_q[1] = 0;
    c.seqlens_k[2] = 0;
  }
  c.packed_q = true;
  c.seed = seed;
  return c;
}

InferenceCase paged_decode_case(int batch, std::int64_t context) {
  InferenceCase c;
  c.seqlens_q.assign(static_cast<std::size_t>(batch), 1);
  c.seqlens_k.assign(static_cast<std::size_t>(batch), context);
  c.heads_q = 32;
  c.heads_kv = 4;
  c.head_dim = 128;
  c.keys = KeyStorage::paged;
  c.page_size = 16;
  return c;
}

std::string InferenceVerdict::describe() const {
  std::ostringstream os;
  os << (ok ? "PASS" : "FAIL") << ": worst error / bound over the sequences " << worst_ratio;
  if (!first_failure.empty()) os << "\n" << first_failure;
  return os.str();
}

InferenceVerdict run_inference_case(Runtime& runtime, const InferenceCase& c) {
  check_case(c);
  const QueryRows rows(c);
  const KeyPlacement keys(c);
  const HostInputs inputs = make_inputs(c, rows, keys);
  const reference::RotaryTables tables = rotary_tables(c);
  const Outputs outputs = run_forward(runtime, c, rows, keys, inputs, tables);
  InferenceVerdict verdict = judge(c, rows, inputs.cases, outputs, tables);
  if (c.append > 0) {
    const std::string cache = check_cache(c, keys, inputs, outputs, tables);
    if (!cache.empty() && verdict.ok) verdict.first_failure = cache;
    verdict.ok = verdict.ok && cache.empty();
  }
  return verdict;
}

}  // namespace flashjit::testing
