#include "cases/inference_case.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include "cases/attention_case.hpp"
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

/// Where each sequence's keys go: the row of key j of sequence b in k's [rows, heads_kv,
/// head_dim] storage (dense, packed, or a page of the paged cache).
struct KeyPlacement {
  std::int64_t rows = 0;
  std::vector<std::int32_t> cu;          // packed
  std::vector<std::int32_t> page_table;  // paged: [batch, max_pages], -1 where unused
  std::int64_t max_pages = 0, num_pages = 0;

  KeyPlacement(const InferenceCase& c) {
    const auto n = static_cast<std::int64_t>(c.seqlens_k.size());
    if (c.keys == KeyStorage::dense) rows = n * longest_length(c.seqlens_k);
    if (c.keys == KeyStorage::packed) {
      cu = sequence_offsets(c.seqlens_k);
      rows = cu.back();
    }
    if (c.keys != KeyStorage::paged) return;
    const std::int64_t p = c.page_size;
    max_pages = std::max<std::int64_t>(1, (longest_length(c.seqlens_k) + p - 1) / p);
    std::int64_t used = 0;
    for (std::int64_t len : c.seqlens_k) used += (len + p - 1) / p;
    num_pages = used + 3;  // spare pages, poisoned: a read of one shows as NaN
    std::vector<std::int32_t> order(static_cast<std::size_t>(num_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(c.seed));
    page_table.assign(static_cast<std::size_t>(n * max_pages), -1);
    std::size_t next = 0;
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t q = 0; q < (c.seqlens_k[b] + p - 1) / p; ++q) {
        page_table[b * max_pages + q] = order[next++];
      }
    }
    rows = num_pages * p;
  }

  std::int64_t row(const InferenceCase& c, std::int64_t b, std::int64_t j) const {
    switch (c.keys) {
      case KeyStorage::dense:
        return b * longest_length(c.seqlens_k) + j;
      case KeyStorage::packed:
        return cu[b] + j;
      case KeyStorage::paged:
        return std::int64_t{page_table[b * max_pages + j / c.page_size]} * c.page_size +
               j % c.page_size;
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

}  // namespace

reference::Problem sequence_problem(const InferenceCase& c, std::size_t b) {
  return {.batch = 1,
          .heads_q = c.heads_q,
          .heads_kv = c.heads_kv,
          .seqlen_q = c.seqlens_q[b],
          .seqlen_k = c.seqlens_k[b],
          .head_dim = c.head_dim,
          .causal = c.causal,
          .window_left = c.window_left,
          .softcap = c.softcap};
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
  os << ".hq" << heads_q << ".hkv" << heads_kv << ".d" << head_dim << '.' << dtype_name(dtype)
     << (packed_q ? ".packedq" : "")
     << (keys == KeyStorage::packed  ? ".packedk"
         : keys == KeyStorage::paged ? ".paged" + std::to_string(page_size)
                                     : "")
     << (causal ? ".causal" : "") << (window_left >= 0 ? ".left" + std::to_string(window_left) : "")
     << (softcap > 0 ? ".softcap" : "") << ".split" << splits
     << (deterministic ? ".deterministic" : "") << ".seed" << seed;
  return os.str();
}

Attention InferenceCase::attention() const {
  Attention a;
  a.batch = static_cast<std::int64_t>(seqlens_q.size());
  a.heads_q = heads_q;
  a.heads_kv = heads_kv;
  a.seqlen_q = longest_length(seqlens_q);
  a.seqlen_k = longest_length(seqlens_k);
  a.head_dim = head_dim;
  a.causal = causal;
  a.window_left = window_left;
  a.softcap = static_cast<float>(softcap);
  a.deterministic = deterministic;
  return a;
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

std::string InferenceVerdict::describe() const {
  std::ostringstream os;
  os << (ok ? "PASS" : "FAIL") << ": worst O error / bound over the sequences " << worst_ratio;
  if (!first_failure.empty()) os << "\n" << first_failure;
  return os.str();
}

InferenceVerdict run_inference_case(Runtime& runtime, const InferenceCase& c) {
  const auto n = static_cast<std::int64_t>(c.seqlens_q.size());
  if (c.seqlens_k.size() != c.seqlens_q.size()) {
    throw std::invalid_argument("an inference case needs one key length per sequence");
  }
  if (!c.packed_q &&
      longest_length(c.seqlens_q) != *std::min_element(c.seqlens_q.begin(), c.seqlens_q.end())) {
    throw std::invalid_argument("dense queries need one length for every sequence; pack them");
  }
  const Attention a = c.attention();
  const std::int64_t h = c.heads_q, hk = c.heads_kv, d = c.head_dim;
  const std::vector<std::int32_t> cu_q =
      c.packed_q ? sequence_offsets(c.seqlens_q) : std::vector<std::int32_t>{};
  const std::int64_t total_q = c.packed_q ? cu_q.back() : n * a.seqlen_q;
  const auto q_row = [&](std::int64_t b) { return c.packed_q ? cu_q[b] : b * a.seqlen_q; };
  const KeyPlacement keys(c);

  // Inputs, each sequence's from its own ForwardCase seed; unused key rows stay NaN.
  std::vector<std::uint16_t> q_bits(static_cast<std::size_t>(total_q * h * d), 0);
  std::vector<std::uint16_t> k_bits(static_cast<std::size_t>(keys.rows * hk * d), kPoison);
  std::vector<std::uint16_t> v_bits = k_bits;
  std::vector<ForwardCase> cases;
  for (std::int64_t b = 0; b < n; ++b) {
    const ForwardCase f = sequence_case(c, static_cast<std::size_t>(b));
    cases.push_back(f);
    const reference::Problem& p = f.problem;
    const RoundedTensor q = rounded_random(p.q_shape(), reference::Layout::bshd, f.seed, c.dtype);
    const RoundedTensor k =
        rounded_random(p.kv_shape(), reference::Layout::bshd, f.seed + 1, c.dtype);
    const RoundedTensor v =
        rounded_random(p.kv_shape(), reference::Layout::bshd, f.seed + 2, c.dtype);
    std::copy(q.bits.begin(), q.bits.end(), q_bits.begin() + q_row(b) * h * d);
    for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
      const std::int64_t row = keys.row(c, b, j);
      std::copy_n(k.bits.begin() + j * hk * d, hk * d, k_bits.begin() + row * hk * d);
      std::copy_n(v.bits.begin() + j * hk * d, hk * d, v_bits.begin() + row * hk * d);
    }
  }

  DeviceBuffer q_buf = upload(runtime, q_bits), k_buf = upload(runtime, k_bits),
               v_buf = upload(runtime, v_bits);
  DeviceBuffer o_buf = upload(runtime, std::vector<std::uint16_t>(q_bits.size(), kPoison));
  DeviceBuffer lse_buf =
      upload(runtime, std::vector<float>(static_cast<std::size_t>(total_q * h),
                                         std::numeric_limits<float>::quiet_NaN()));
  std::vector<std::int32_t> seqlens_k(c.seqlens_k.begin(), c.seqlens_k.end());
  DeviceBuffer cu_q_buf = upload(runtime, cu_q.empty() ? std::vector<std::int32_t>{0} : cu_q);
  DeviceBuffer cu_k_buf = upload(runtime, keys.cu.empty() ? std::vector<std::int32_t>{0} : keys.cu);
  DeviceBuffer lens_buf =
      upload(runtime, seqlens_k.empty() ? std::vector<std::int32_t>{0} : seqlens_k);
  DeviceBuffer table_buf =
      upload(runtime, keys.page_table.empty() ? std::vector<std::int32_t>{0} : keys.page_table);

  Sequences s;
  s.splits = c.splits;
  TensorView q, o, k, v, lse;
  if (c.packed_q) {
    s.cu_seqlens_q = TensorView::contiguous(cu_q_buf.data(), DType::i32, {n + 1});
    q = TensorView::contiguous(q_buf.data(), c.dtype, {total_q, h, d});
    o = TensorView::contiguous(o_buf.data(), c.dtype, {total_q, h, d});
    lse = TensorView::contiguous(lse_buf.data(), DType::f32, {h, total_q});
  } else {
    q = TensorView::contiguous(q_buf.data(), c.dtype, {n, a.seqlen_q, h, d});
    o = TensorView::contiguous(o_buf.data(), c.dtype, {n, a.seqlen_q, h, d});
    lse = TensorView::contiguous(lse_buf.data(), DType::f32, {n, h, a.seqlen_q});
  }
  if (c.keys == KeyStorage::paged) {
    k = TensorView::contiguous(k_buf.data(), c.dtype, {keys.num_pages, c.page_size, hk, d});
    v = TensorView::contiguous(v_buf.data(), c.dtype, {keys.num_pages, c.page_size, hk, d});
    s.page_table = TensorView::contiguous(table_buf.data(), DType::i32, {n, keys.max_pages});
    s.seqlens_k = TensorView::contiguous(lens_buf.data(), DType::i32, {n});
  } else if (c.keys == KeyStorage::packed) {
    k = TensorView::contiguous(k_buf.data(), c.dtype, {keys.rows, hk, d});
    v = TensorView::contiguous(v_buf.data(), c.dtype, {keys.rows, hk, d});
    s.cu_seqlens_k = TensorView::contiguous(cu_k_buf.data(), DType::i32, {n + 1});
  } else {
    k = TensorView::contiguous(k_buf.data(), c.dtype, {n, a.seqlen_k, hk, d});
    v = TensorView::contiguous(v_buf.data(), c.dtype, {n, a.seqlen_k, hk, d});
    const bool one_length =
        longest_length(c.seqlens_k) == *std::min_element(c.seqlens_k.begin(), c.seqlens_k.end());
    // Keys of one length need no index array at all (a dense batch, decoded or split).
    if (!one_length) s.seqlens_k = TensorView::contiguous(lens_buf.data(), DType::i32, {n});
  }
  runtime.forward(a, s, q, k, v, o, lse);
  runtime.synchronize();

  std::vector<std::uint16_t> o_bits(q_bits.size());
  std::vector<float> lse_all(static_cast<std::size_t>(total_q * h));
  runtime.copy_to_host(o_bits.data(), o_buf.data(), o_bits.size() * 2);
  runtime.copy_to_host(lse_all.data(), lse_buf.data(), lse_all.size() * 4);

  InferenceVerdict verdict;
  verdict.ok = true;
  verdict.out = widen(c.dtype, o_bits);
  for (std::int64_t b = 0; b < n; ++b) {
    const ForwardCase& f = cases[static_cast<std::size_t>(b)];
    const std::int64_t lq = f.problem.seqlen_q;
    if (lq == 0) continue;
    const std::vector<double> out(verdict.out.begin() + q_row(b) * h * d,
                                  verdict.out.begin() + (q_row(b) + lq) * h * d);
    std::vector<float> lse_rows;
    for (std::int64_t head = 0; head < h; ++head) {
      for (std::int64_t i = 0; i < lq; ++i) {
        const std::int64_t at =
            c.packed_q ? head * total_q + q_row(b) + i : (b * h + head) * a.seqlen_q + i;
        lse_rows.push_back(lse_all[static_cast<std::size_t>(at)]);
      }
    }
    std::vector<double> expected_out, expected_lse;
    if (f.problem.seqlen_k > 0) {
      const reference::Problem& p = f.problem;
      const RoundedTensor q_in =
          rounded_random(p.q_shape(), reference::Layout::bshd, f.seed, c.dtype);
      const RoundedTensor k_in =
          rounded_random(p.kv_shape(), reference::Layout::bshd, f.seed + 1, c.dtype);
      const RoundedTensor v_in =
          rounded_random(p.kv_shape(), reference::Layout::bshd, f.seed + 2, c.dtype);
      const reference::ForwardResult r =
          reference::forward(p, q_in.values.view(), k_in.values.view(), v_in.values.view());
      expected_out = r.out.values;
      expected_lse = r.lse;
    }
    const SequenceCheck check = check_sequence(f, out, lse_rows, expected_out, expected_lse);
    verdict.worst_ratio = std::max(verdict.worst_ratio, check.ratio);
    if (!check.failure.empty() && verdict.first_failure.empty()) {
      verdict.first_failure = "sequence " + std::to_string(b) + ": " + check.failure;
    }
  }
  verdict.ok = verdict.first_failure.empty();
  return verdict;
}

}  // namespace flashjit::testing
