#pragma once
// What the forward and backward test cases (attention_case, backward_case) share: inputs
// rounded to the kernel's dtype, their upload, the float64 scores of one query row, and the
// check that every element of an output was written. Header-only so that every target that
// compiles one of the cases gets it without a build change.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "flashjit/attention.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/runtime.hpp"
#include "reference/attention_reference.hpp"
#include "reference/checker.hpp"

namespace flashjit::testing::case_inputs {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

inline std::uint16_t to_bits(DType dtype, double value) {
  const auto f = static_cast<float>(value);
  return dtype == DType::f16 ? f16_bits_from_float(f) : bf16_bits_from_float(f);
}
inline double from_bits(DType dtype, std::uint16_t bits) {
  return dtype == DType::f16 ? float_from_f16_bits(bits) : float_from_bf16_bits(bits);
}
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

/// Device (or emulator host) copy of `bits`.
inline DeviceBuffer upload(Runtime& runtime, const std::vector<std::uint16_t>& bits) {
  DeviceBuffer buffer = runtime.allocate(bits.size() * sizeof(std::uint16_t));
  runtime.copy_to_device(buffer.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
  return buffer;
}

/// The float64 score of query row `i` of (batch `b`, query head `h`) against key `j`, which
/// the mask must let it see: scale · q·k, soft-capped.
inline double score(const reference::Problem& p, reference::ConstView4 q, reference::ConstView4 k,
                    std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  const double* q_row = &q(b, i, h, 0);
  const double* k_row = &k(b, j, p.kv_head(h), 0);
  double dot = 0;
  for (std::int64_t d = 0; d < p.head_dim; ++d) {
    dot += q_row[d * q.strides[3]] * k_row[d * k.strides[3]];
  }
  dot *= p.scale();
  return p.softcap > 0 ? p.softcap * std::tanh(dot / p.softcap) : dot;
}

/// The float64 scores of query row `i` of (batch `b`, query head `h`) against every key:
/// score(), -inf where the mask hides the key.
inline void row_scores(const reference::Problem& p, reference::ConstView4 q,
                       reference::ConstView4 k, std::int64_t b, std::int64_t h, std::int64_t i,
                       std::vector<double>& s) {
  s.assign(static_cast<std::size_t>(p.seqlen_k), kNegInf);
  for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
    if (p.visible(i, j)) s[static_cast<std::size_t>(j)] = score(p, q, k, b, h, i, j);
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

}  // namespace flashjit::testing::case_inputs
