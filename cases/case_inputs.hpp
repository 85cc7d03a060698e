#pragma once
// What the forward and backward test cases (attention_case, backward_case) share: inputs
// rounded to the kernel's dtype, their upload, poisoned outputs and their widening back, the
// rows a sampled case checks, the float64 scores of one query row, and the check that every
// element of an output was written. Header-only so that every target that compiles one of the
// cases gets it without a build change.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "attention/check/attention_reference.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/runtime.hpp"
#include "reference/checker.hpp"

namespace flashjit::testing::case_inputs {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// The bits of `value` in `dtype` (fp16, bf16, or e4m3 in the low byte).
inline std::uint16_t to_bits(DType dtype, double value) {
  const auto f = static_cast<float>(value);
  if (dtype == DType::e4m3) return e4m3_bits_from_float(f);
  return dtype == DType::f16 ? f16_bits_from_float(f) : bf16_bits_from_float(f);
}
inline double from_bits(DType dtype, std::uint16_t bits) {
  if (dtype == DType::e4m3) return float_from_e4m3_bits(static_cast<std::uint8_t>(bits));
  return dtype == DType::f16 ? float_from_f16_bits(bits) : float_from_bf16_bits(bits);
}
/// The dtype a forward of `dtype` writes O in: its own, bf16 for the fp8 forward.
inline DType output_dtype(DType dtype) { return dtype == DType::e4m3 ? DType::bf16 : dtype; }
/// `value` rounded to `dtype` (through float, as a kernel's conversion does).
inline double round_to(DType dtype, double value) {
  return from_bits(dtype, to_bits(dtype, value));
}

/// A random tensor whose values are exactly representable in `dtype`, and their bits.
struct RoundedTensor {
  reference::Tensor4 values;
  std::vector<std::uint16_t> bits;
};
inline RoundedTensor rounded_random(const reference::Shape4& shape, reference::Layout layout,
                                    std::uint64_t seed, DType dtype) {
  RoundedTensor t{reference::random_tensor(shape, layout, seed), {}};
  t.bits.reserve(t.values.values.size());
  for (double& x : t.values.values) {
    t.bits.push_back(to_bits(dtype, x));
    x = from_bits(dtype, t.bits.back());
  }
  return t;
}

inline flashjit::Layout library_layout(reference::Layout layout) {
  return layout == reference::Layout::bshd ? flashjit::Layout::bshd : flashjit::Layout::bhsd;
}

/// Device (or emulator host) copy of `values` (16-bit input bits, say, or fp32 LSE).
template <class T>
DeviceBuffer upload(Runtime& runtime, const std::vector<T>& values) {
  DeviceBuffer buffer = runtime.allocate(values.size() * sizeof(T));
  runtime.copy_to_device(buffer.data(), values.data(), values.size() * sizeof(T));
  return buffer;
}

/// Device copy of an input's `bits` in `dtype`: two bytes an element, one for e4m3.
inline DeviceBuffer upload_input(Runtime& runtime, DType dtype,
                                 const std::vector<std::uint16_t>& bits) {
  if (dtype != DType::e4m3) return upload(runtime, bits);
  return upload(runtime, std::vector<std::uint8_t>(bits.begin(), bits.end()));
}

/// `values`, or one 0 where there are none (an allocation of no bytes has no address).
template <class T>
std::vector<T> or_zero(const std::vector<T>& values) {
  return values.empty() ? std::vector<T>{0} : values;
}

/// `lengths` as the int32 an index array holds.
inline std::vector<std::int32_t> int32_values(const std::vector<std::int64_t>& lengths) {
  return {lengths.begin(), lengths.end()};
}

/// What 16-bit outputs start as: NaN in fp16 and bf16, so that an element the kernels never
/// write fails the check.
inline constexpr std::uint16_t kPoison = 0x7fff;

/// `bits` of `dtype` widened to double.
inline std::vector<double> widen(DType dtype, const std::vector<std::uint16_t>& bits) {
  std::vector<double> values(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) values[i] = from_bits(dtype, bits[i]);
  return values;
}

/// A row a sampled case checks: a query row of a query head (O, LSE, dQ) or a key row of a
/// key/value head (dK, dV).
struct SampledRow {
  std::int64_t batch, head, row;
};

/// `n` rows evenly spread over `seqlen`, the first and last included, of the (batch, head)
/// pairs first, middle and last.
inline std::vector<SampledRow> spread_rows(std::int64_t n, std::int64_t batch, std::int64_t heads,
                                           std::int64_t seqlen) {
  n = std::min(n, seqlen);
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs = {
      {0, 0}, {batch / 2, heads / 2}, {batch - 1, heads - 1}};
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());  // already sorted
  std::vector<SampledRow> rows;
  for (const auto& [b, h] : pairs) {
    // Distinct: the spacing (seqlen - 1) / (n - 1) is at least 1.
    for (std::int64_t r = 0; r < n; ++r) {
      rows.push_back({b, h, n == 1 ? 0 : r * (seqlen - 1) / (n - 1)});
    }
  }
  return rows;
}

/// The sampled rows `rows` of a tensor (all of it, dense in `layout`), in their order.
inline std::vector<double> gather(const std::vector<double>& all, const reference::Shape4& shape,
                                  reference::Layout layout, const std::vector<SampledRow>& rows) {
  const reference::ConstView4 view{all.data(), shape, reference::dense_strides(shape, layout)};
  std::vector<double> out;
  for (const SampledRow& r : rows) {
    for (std::int64_t d = 0; d < shape[3]; ++d) out.push_back(view(r.batch, r.row, r.head, d));
  }
  return out;
}

/// The float64 score of query row `i` of (batch `b`, query head `h`) against key `j` as the
/// score modifier is given it: scale · q·k, soft-capped.
inline double capped_score(const reference::Problem& p, reference::ConstView4 q,
                           reference::ConstView4 k, std::int64_t b, std::int64_t h, std::int64_t i,
                           std::int64_t j) {
  const double* q_row = &q(b, i, h, 0);
  const double* k_row = &k(b, j, p.kv_head(h), 0);
  double dot = 0;
  for (std::int64_t d = 0; d < p.head_dim; ++d) {
    dot += q_row[d * q.strides[3]] * k_row[d * k.strides[3]];
  }
  dot *= p.scale();
  return p.softcap > 0 ? p.softcap * std::tanh(dot / p.softcap) : dot;
}

/// The float64 score of query row `i` of (batch `b`, query head `h`) against key `j`, which
/// the mask must let it see: capped_score(), then the score modifier's.
inline double score(const reference::Problem& p, reference::ConstView4 q, reference::ConstView4 k,
                    std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  return p.modified(capped_score(p, q, k, b, h, i, j), b, h, i, j);
}

/// The float64 scores of query row `i` of (batch `b`, query head `h`) against every key:
/// score(), -inf where the mask hides the key.
inline void row_scores(const reference::Problem& p, reference::ConstView4 q,
                       reference::ConstView4 k, std::int64_t b, std::int64_t h, std::int64_t i,
                       std::vector<double>& s) {
  s.assign(static_cast<std::size_t>(p.seqlen_k), kNegInf);
  for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
    if (p.sees(b, h, i, j)) s[static_cast<std::size_t>(j)] = score(p, q, k, b, h, i, j);
  }
}

/// Fails `result` when some element of `values` is `bad` (NaN left from the poison, say),
/// saying how many and where the first is.
template <class T, class Bad>
void check_every_element(const std::vector<T>& values, Bad bad, const std::string& what,
                         reference::CheckResult& result) {
  std::size_t count = 0, first = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (bad(values[i]) && count++ == 0) first = i;
  }
  if (count == 0) return;
  result.ok = false;
  result.report += "\n  " + std::to_string(count) + " elements of " + what +
                   " unwritten or out of range, the first at flat index " + std::to_string(first);
}

/// check_every_element for an output widened to double: fails `result` when some element is
/// not finite (the poison left, say).
inline void check_every_element_finite(const std::vector<double>& values, const std::string& what,
                                       reference::CheckResult& result) {
  check_every_element(
      values, [](double x) { return !std::isfinite(x); }, what, result);
}

}  // namespace flashjit::testing::case_inputs
