// The backward of a variable-length batch, end to end (see run_inference_backward_case).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "cases/backward_case.hpp"
#include "cases/case_inputs.hpp"
#include "cases/inference_case.hpp"

namespace flashjit::testing {
namespace {

using namespace case_inputs;  // rounding, upload, poison, widening

/// Sequence b's own problem as a one-sequence BackwardCase: its inputs (seeded per sequence,
/// as backward_case makes them) and its bound.
BackwardCase sequence_case(const InferenceCase& c, std::size_t b) {
  BackwardCase f;
  f.problem = sequence_problem(c, b);
  f.dtype = c.dtype;
  f.seed = c.seed * 1000 + b * 4;
  return f;
}

struct Inputs {
  RoundedTensor q, k, v, dout;
};
Inputs make_inputs(const BackwardCase& f) {
  const reference::Problem& p = f.problem;
  const auto bshd = reference::Layout::bshd;
  return {rounded_random(p.q_shape(), bshd, f.seed, f.dtype),
          rounded_random(p.kv_shape(), bshd, f.seed + 1, f.dtype),
          rounded_random(p.kv_shape(), bshd, f.seed + 2, f.dtype),
          rounded_random(p.q_shape(), bshd, f.seed + 3, f.dtype)};
}

/// `count` values of `all` from `first`.
std::vector<double> slice(const std::vector<double>& all, std::int64_t first, std::int64_t count) {
  return {all.begin() + first, all.begin() + first + count};
}

/// One gradient of one sequence against its reference (zeros where the sequence has no
/// queries or no keys: those must be exactly 0); "" when it passes.
std::string check_gradient(const char* name, const std::vector<double>& actual,
                           const std::vector<double>& expected, double plain_error,
                           double& worst_ratio) {
  const double bound = std::max(2 * plain_error, 1e-5);
  const reference::CheckResult check = reference::check_close(actual, expected, bound, name);
  worst_ratio = std::max(worst_ratio, check.rel_l2 / bound);
  return check.ok ? "" : check.describe();
}

}  // namespace

InferenceVerdict run_inference_backward_case(Runtime& runtime, const InferenceCase& c) {
  const auto n = static_cast<std::int64_t>(c.seqlens_q.size());
  const bool packed_k = c.keys == KeyStorage::packed;
  if (c.keys == KeyStorage::paged || c.splits != 0 ||
      (!packed_k &&
       longest_length(c.seqlens_k) != *std::min_element(c.seqlens_k.begin(), c.seqlens_k.end())) ||
      (!c.packed_q &&
       longest_length(c.seqlens_q) != *std::min_element(c.seqlens_q.begin(), c.seqlens_q.end()))) {
    throw std::invalid_argument(
        "a backward case has packed or equal-length queries and keys, no pages, no splits");
  }
  const Attention a = c.attention();
  const std::int64_t h = c.heads_q, hk = c.heads_kv, d = c.head_dim;
  const std::vector<std::int32_t> cu_q = sequence_offsets(c.seqlens_q);
  const std::vector<std::int32_t> cu_k = sequence_offsets(c.seqlens_k);
  const std::int64_t total_q = c.packed_q ? cu_q.back() : n * a.seqlen_q;
  const std::int64_t total_k = packed_k ? cu_k.back() : n * a.seqlen_k;
  const auto q_row = [&](std::int64_t b) { return c.packed_q ? cu_q[b] : b * a.seqlen_q; };
  const auto k_row = [&](std::int64_t b) { return packed_k ? cu_k[b] : b * a.seqlen_k; };

  std::vector<std::uint16_t> q(total_q * h * d), dout(q.size()), k(total_k * hk * d), v(k.size());
  std::vector<BackwardCase> cases;
  std::vector<Inputs> inputs;
  for (std::int64_t b = 0; b < n; ++b) {
    cases.push_back(sequence_case(c, static_cast<std::size_t>(b)));
    inputs.push_back(make_inputs(cases.back()));
    const Inputs& in = inputs.back();
    std::copy(in.q.bits.begin(), in.q.bits.end(), q.begin() + q_row(b) * h * d);
    std::copy(in.dout.bits.begin(), in.dout.bits.end(), dout.begin() + q_row(b) * h * d);
    std::copy(in.k.bits.begin(), in.k.bits.end(), k.begin() + k_row(b) * hk * d);
    std::copy(in.v.bits.begin(), in.v.bits.end(), v.begin() + k_row(b) * hk * d);
  }
  DeviceBuffer q_buf = upload(runtime, q), k_buf = upload(runtime, k), v_buf = upload(runtime, v),
               dout_buf = upload(runtime, dout);
  const std::vector<std::uint16_t> poison_q(q.size(), kPoison), poison_k(k.size(), kPoison);
  DeviceBuffer o_buf = upload(runtime, poison_q), dq_buf = upload(runtime, poison_q),
               dk_buf = upload(runtime, poison_k), dv_buf = upload(runtime, poison_k);
  DeviceBuffer lse_buf =
      upload(runtime, std::vector<float>(std::max<std::int64_t>(1, total_q * h)));
  DeviceBuffer cu_q_buf = upload(runtime, cu_q), cu_k_buf = upload(runtime, cu_k);

  Sequences s;
  const auto query_view = [&](DeviceBuffer& buf) {
    return c.packed_q ? TensorView::contiguous(buf.data(), c.dtype, {total_q, h, d})
                      : TensorView::contiguous(buf.data(), c.dtype, {n, a.seqlen_q, h, d});
  };
  const auto key_view = [&](DeviceBuffer& buf) {
    return packed_k ? TensorView::contiguous(buf.data(), c.dtype, {total_k, hk, d})
                    : TensorView::contiguous(buf.data(), c.dtype, {n, a.seqlen_k, hk, d});
  };
  const TensorView lse =
      c.packed_q ? TensorView::contiguous(lse_buf.data(), DType::f32, {h, total_q})
                 : TensorView::contiguous(lse_buf.data(), DType::f32, {n, h, a.seqlen_q});
  if (c.packed_q) s.cu_seqlens_q = TensorView::contiguous(cu_q_buf.data(), DType::i32, {n + 1});
  if (packed_k) s.cu_seqlens_k = TensorView::contiguous(cu_k_buf.data(), DType::i32, {n + 1});
  runtime.forward(a, s, query_view(q_buf), key_view(k_buf), key_view(v_buf), query_view(o_buf),
                  lse);
  runtime.backward(a, s, query_view(q_buf), key_view(k_buf), key_view(v_buf), query_view(o_buf),
                   lse, query_view(dout_buf), query_view(dq_buf), key_view(dk_buf),
                   key_view(dv_buf));
  runtime.synchronize();
  const auto download = [&](DeviceBuffer& buf, std::size_t count) {
    std::vector<std::uint16_t> bits(count);
    runtime.copy_to_host(bits.data(), buf.data(), count * 2);
    return widen(c.dtype, bits);
  };
  const std::vector<double> dq = download(dq_buf, q.size()), dk = download(dk_buf, k.size()),
                            dv = download(dv_buf, k.size());

  InferenceVerdict verdict;
  for (std::int64_t b = 0; b < n; ++b) {
    const BackwardCase& f = cases[static_cast<std::size_t>(b)];
    const reference::Problem& p = f.problem;
    const std::int64_t q_count = p.seqlen_q * h * d, k_count = p.seqlen_k * hk * d;
    std::vector<double> dq_ref(q_count, 0.0), dk_ref(k_count, 0.0), dv_ref(k_count, 0.0);
    PlainBackwardErrors plain;
    if (p.seqlen_q > 0 && p.seqlen_k > 0) {
      const Inputs& in = inputs[static_cast<std::size_t>(b)];
      const reference::Gradients g = reference::backward(p, in.q.values.view(), in.k.values.view(),
                                                         in.v.values.view(), in.dout.values.view());
      dq_ref = g.dq.values;
      dk_ref = g.dk.values;
      dv_ref = g.dv.values;
      plain = plain_backward_errors(f);
    }
    std::string failure = check_gradient("dQ", slice(dq, q_row(b) * h * d, q_count), dq_ref,
                                         plain.dq, verdict.worst_ratio);
    failure += check_gradient("dK", slice(dk, k_row(b) * hk * d, k_count), dk_ref, plain.dk,
                              verdict.worst_ratio);
    failure += check_gradient("dV", slice(dv, k_row(b) * hk * d, k_count), dv_ref, plain.dv,
                              verdict.worst_ratio);
    if (!failure.empty() && verdict.first_failure.empty()) {
      verdict.first_failure = "sequence " + std::to_string(b) + ": " + failure;
    }
  }
  verdict.ok = verdict.first_failure.empty();
  verdict.out = dq;
  verdict.out.insert(verdict.out.end(), dk.begin(), dk.end());
  verdict.out.insert(verdict.out.end(), dv.begin(), dv.end());
  return verdict;
}

}  // namespace flashjit::testing
