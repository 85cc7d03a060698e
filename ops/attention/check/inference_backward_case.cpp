// The backward of a variable-length batch, end to end (see run_inference_backward_case).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "attention/check/backward_case.hpp"
#include "attention/check/inference_case.hpp"
#include "cases/case_inputs.hpp"

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
          rounded_random(p.v_shape(), bshd, f.seed + 2, f.dtype),
          rounded_random(p.o_shape(), bshd, f.seed + 3, f.dtype)};
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

/// Elements [first, end) of a gradient, the rows a sequence does not use: "" when all are 0.
std::string check_zero(const char* name, const std::vector<double>& all, std::int64_t first,
                       std::int64_t end) {
  for (std::int64_t e = first; e < end; ++e) {
    if (all[static_cast<std::size_t>(e)] != 0) {
      return std::string(name) + "'s element " + std::to_string(e) + " (an unused row) is " +
             std::to_string(all[static_cast<std::size_t>(e)]) + "; expected 0. ";
    }
  }
  return "";
}

/// Whether every length in `lengths` is the same.
bool one_length(const std::vector<std::int64_t>& lengths) {
  return longest_length(lengths) == *std::min_element(lengths.begin(), lengths.end());
}

/// Refuses a case the backward does not take.
void check_case(const InferenceCase& c) {
  if (c.keys == KeyStorage::paged || c.splits != 0 ||
      (c.keys != KeyStorage::packed && !one_length(c.key_spans())) ||
      (!c.packed_q && !one_length(c.query_spans()))) {
    throw std::invalid_argument(
        "a backward case has packed or equal-span queries and keys, no pages, no splits");
  }
}

/// Where each sequence's queries and keys go: packed by cu_seqlens, or one block of the
/// (single) length per sequence.
struct Rows {
  std::int64_t n, h, hk, d, dv;  // dv: V's, O's head dim
  bool packed_q, packed_k;
  std::int64_t seqlen_q, seqlen_k;  // the longest
  std::vector<std::int32_t> cu_q, cu_k;
  std::int64_t total_q, total_k;

  explicit Rows(const InferenceCase& c)
      : n(static_cast<std::int64_t>(c.seqlens_q.size())),
        h(c.heads_q),
        hk(c.heads_kv),
        d(c.head_dim),
        dv(c.value_dim()),
        packed_q(c.packed_q),
        packed_k(c.keys == KeyStorage::packed),
        seqlen_q(longest_length(c.query_spans())),
        seqlen_k(longest_length(c.key_spans())),
        cu_q(sequence_offsets(c.query_spans())),
        cu_k(sequence_offsets(c.key_spans())),
        total_q(packed_q ? cu_q.back() + c.spare_rows : n * seqlen_q),
        total_k(packed_k ? cu_k.back() + c.spare_rows : n * seqlen_k) {}

  std::int64_t q_row(std::int64_t b) const { return packed_q ? cu_q[b] : b * seqlen_q; }
  std::int64_t k_row(std::int64_t b) const { return packed_k ? cu_k[b] : b * seqlen_k; }
};

/// The whole case's inputs, each sequence's own case and inputs.
struct HostInputs {
  std::vector<std::uint16_t> q, k, v, dout;
  std::vector<BackwardCase> cases;
  std::vector<Inputs> inputs;
};
HostInputs make_inputs(const InferenceCase& c, const Rows& r) {
  HostInputs all;
  // NaN in the spare rows past the last sequence, which no sequence may read
  all.q.resize(static_cast<std::size_t>(r.total_q * r.h * r.d), kPoison);
  all.dout.resize(static_cast<std::size_t>(r.total_q * r.h * r.dv), kPoison);
  all.k.resize(static_cast<std::size_t>(r.total_k * r.hk * r.d), kPoison);
  all.v.resize(static_cast<std::size_t>(r.total_k * r.hk * r.dv), kPoison);
  for (std::int64_t b = 0; b < r.n; ++b) {
    all.cases.push_back(sequence_case(c, static_cast<std::size_t>(b)));
    all.inputs.push_back(make_inputs(all.cases.back()));
    const Inputs& in = all.inputs.back();
    std::copy(in.q.bits.begin(), in.q.bits.end(), all.q.begin() + r.q_row(b) * r.h * r.d);
    std::copy(in.dout.bits.begin(), in.dout.bits.end(), all.dout.begin() + r.q_row(b) * r.h * r.dv);
    std::copy(in.k.bits.begin(), in.k.bits.end(), all.k.begin() + r.k_row(b) * r.hk * r.d);
    std::copy(in.v.bits.begin(), in.v.bits.end(), all.v.begin() + r.k_row(b) * r.hk * r.dv);
  }
  return all;
}

/// dQ, dK and dV as the backward wrote them, widened.
struct Gradients {
  std::vector<double> dq, dk, dv;
};

/// The case's tensors on the runtime's device, outputs poisoned.
struct DeviceTensors {
  DeviceBuffer q, k, v, dout, o, dq, dk, dv, lse, cu_q, cu_k, seqused_q, seqused_k;
};
DeviceTensors upload_tensors(Runtime& runtime, const InferenceCase& c, const Rows& r,
                             const HostInputs& in) {
  const std::vector<std::uint16_t> poison_q(in.q.size(), kPoison), poison_k(in.k.size(), kPoison),
      poison_o(in.dout.size(), kPoison), poison_v(in.v.size(), kPoison);
  return {upload(runtime, in.q),
          upload(runtime, in.k),
          upload(runtime, in.v),
          upload(runtime, in.dout),
          upload(runtime, poison_o),
          upload(runtime, poison_q),
          upload(runtime, poison_k),
          upload(runtime, poison_v),
          upload(runtime, std::vector<float>(std::max<std::int64_t>(1, r.total_q * r.h))),
          upload(runtime, r.cu_q),
          upload(runtime, r.cu_k),
          upload(runtime, or_zero(int32_values(c.seqlens_q))),
          upload(runtime, or_zero(int32_values(c.seqlens_k)))};
}

/// The runtime's inference forward (for O and LSE), then its backward on the same sequences.
Gradients run_forward_and_backward(Runtime& runtime, const InferenceCase& c, const Rows& r,
                                   const HostInputs& in) {
  DeviceTensors t = upload_tensors(runtime, c, r, in);
  // q and dq, o and dout (d: head_dim or the value head dim)
  const auto query_view = [&](DeviceBuffer& buf, std::int64_t d) {
    return r.packed_q ? TensorView::contiguous(buf.data(), c.dtype, {r.total_q, r.h, d})
                      : TensorView::contiguous(buf.data(), c.dtype, {r.n, r.seqlen_q, r.h, d});
  };
  // k and dk, v and dv
  const auto key_view = [&](DeviceBuffer& buf, std::int64_t d) {
    return r.packed_k ? TensorView::contiguous(buf.data(), c.dtype, {r.total_k, r.hk, d})
                      : TensorView::contiguous(buf.data(), c.dtype, {r.n, r.seqlen_k, r.hk, d});
  };
  const TensorView lse =
      r.packed_q ? TensorView::contiguous(t.lse.data(), DType::f32, {r.h, r.total_q})
                 : TensorView::contiguous(t.lse.data(), DType::f32, {r.n, r.h, r.seqlen_q});
  Sequences s;
  if (r.packed_q) s.cu_seqlens_q = TensorView::contiguous(t.cu_q.data(), DType::i32, {r.n + 1});
  if (r.packed_k) s.cu_seqlens_k = TensorView::contiguous(t.cu_k.data(), DType::i32, {r.n + 1});
  if (!c.unused_q.empty())
    s.seqused_q = TensorView::contiguous(t.seqused_q.data(), DType::i32, {r.n});
  if (!c.unused_k.empty())
    s.seqlens_k = TensorView::contiguous(t.seqused_k.data(), DType::i32, {r.n});
  const Attention a = c.attention();
  const TensorView q = query_view(t.q, r.d), k = key_view(t.k, r.d), v = key_view(t.v, r.dv),
                   o = query_view(t.o, r.dv);
  runtime.forward(a, s, q, k, v, o, lse);
  runtime.backward(a, s, q, k, v, o, lse, query_view(t.dout, r.dv), query_view(t.dq, r.d),
                   key_view(t.dk, r.d), key_view(t.dv, r.dv));
  runtime.synchronize();
  const auto download = [&](DeviceBuffer& buf, std::size_t count) {
    std::vector<std::uint16_t> bits(count);
    runtime.copy_to_host(bits.data(), buf.data(), count * 2);
    return widen(c.dtype, bits);
  };
  return {download(t.dq, in.q.size()), download(t.dk, in.k.size()), download(t.dv, in.v.size())};
}

/// Sequence b's gradients against its float64 reference: "" when they pass.
std::string judge_sequence(const InferenceCase& c, const Rows& r, const HostInputs& in,
                           const Gradients& g, std::int64_t b, double& worst_ratio) {
  const BackwardCase& f = in.cases[static_cast<std::size_t>(b)];
  const reference::Problem& p = f.problem;
  const std::int64_t q_count = p.seqlen_q * r.h * r.d, k_count = p.seqlen_k * r.hk * r.d;
  const std::int64_t v_count = p.seqlen_k * r.hk * r.dv;
  std::vector<double> dq_ref(q_count, 0.0), dk_ref(k_count, 0.0), dv_ref(v_count, 0.0);
  PlainBackwardErrors plain;
  if (p.seqlen_q > 0 && p.seqlen_k > 0) {
    const Inputs& x = in.inputs[static_cast<std::size_t>(b)];
    reference::Gradients ref = reference::backward(p, x.q.values.view(), x.k.values.view(),
                                                   x.v.values.view(), x.dout.values.view());
    dq_ref = std::move(ref.dq.values);
    dk_ref = std::move(ref.dk.values);
    dv_ref = std::move(ref.dv.values);
    plain = plain_backward_errors(f);
  }
  std::string failure = check_gradient("dQ", slice(g.dq, r.q_row(b) * r.h * r.d, q_count), dq_ref,
                                       plain.dq, worst_ratio);
  failure += check_gradient("dK", slice(g.dk, r.k_row(b) * r.hk * r.d, k_count), dk_ref, plain.dk,
                            worst_ratio);
  failure += check_gradient("dV", slice(g.dv, r.k_row(b) * r.hk * r.dv, v_count), dv_ref, plain.dv,
                            worst_ratio);
  // The rows past the used ones: exactly 0.
  const auto bs = static_cast<std::size_t>(b);
  failure += check_zero("dQ", g.dq, (r.q_row(b) + p.seqlen_q) * r.h * r.d,
                        (r.q_row(b) + c.query_span(bs)) * r.h * r.d);
  failure += check_zero("dK", g.dk, (r.k_row(b) + p.seqlen_k) * r.hk * r.d,
                        (r.k_row(b) + c.key_span(bs)) * r.hk * r.d);
  failure += check_zero("dV", g.dv, (r.k_row(b) + p.seqlen_k) * r.hk * r.dv,
                        (r.k_row(b) + c.key_span(bs)) * r.hk * r.dv);
  return failure;
}

InferenceVerdict judge(const InferenceCase& c, const Rows& r, const HostInputs& in,
                       const Gradients& g) {
  InferenceVerdict verdict;
  for (std::int64_t b = 0; b < static_cast<std::int64_t>(c.seqlens_q.size()); ++b) {
    const std::string failure = judge_sequence(c, r, in, g, b, verdict.worst_ratio);
    if (!failure.empty() && verdict.first_failure.empty()) {
      verdict.first_failure = "sequence " + std::to_string(b) + ": " + failure;
    }
  }
  verdict.ok = verdict.first_failure.empty();
  return verdict;
}

}  // namespace

InferenceVerdict run_inference_backward_case(Runtime& runtime, const InferenceCase& c) {
  check_case(c);
  const Rows rows(c);
  const HostInputs inputs = make_inputs(c, rows);
  const Gradients gradients = run_forward_and_backward(runtime, c, rows, inputs);
  InferenceVerdict verdict = judge(c, rows, inputs, gradients);
  verdict.out = gradients.dq;
  verdict.out.insert(verdict.out.end(), gradients.dk.begin(), gradients.dk.end());
  verdict.out.insert(verdict.out.end(), gradients.dv.begin(), gradients.dv.end());
  return verdict;
}

}  // namespace flashjit::testing
