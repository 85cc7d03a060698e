#include "attention/check/attention_case.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "api/runtime_parts.hpp"
#include "cases/case_inputs.hpp"

namespace flashjit::testing {
namespace {

using reference::ConstView4;
using reference::Layout;
using reference::Tensor4;
using namespace case_inputs;  // rounding, upload, sampled rows, scores, written-element checks

/// out += weight · V[b, j, hk, :]; a zero weight (a masked key) adds nothing and is skipped:
/// causal rows at real sizes see half the keys.
void add_scaled_value(ConstView4 v, std::int64_t b, std::int64_t j, std::int64_t hk, double weight,
                      std::vector<double>& out) {
  if (weight == 0) return;
  const double* v_row = &v(b, j, hk, 0);
  for (std::size_t d = 0; d < out.size(); ++d) {
    out[d] += weight * v_row[static_cast<std::int64_t>(d) * v.strides[3]];
  }
}

/// One row of O from its scores `s` (clobbered) the plain way in `dtype`: S, P = softmax(S)
/// and O = P V each rounded to `dtype`, sums exact; with `dropout` (each key's factor, as
/// reference::Problem::dropout gives it), P's dropped. A row with no visible key gets O = 0.
/// For e4m3 (the fp8 forward) what that kernel rounds: S stays exact (it is fp32 there), P is
/// rounded to e4m3 before its division by the row's sum, O to bf16.
void plain_row(DType dtype, ConstView4 v, std::int64_t b, std::int64_t hk, std::vector<double>& s,
               std::vector<double>& out, const std::vector<double>& dropout = {}) {
  out.assign(static_cast<std::size_t>(v.shape[3]), 0.0);
  const bool fp8 = dtype == DType::e4m3;
  double max = kNegInf;
  for (double& sj : s) max = std::max(max, sj = fp8 ? sj : round_to(dtype, sj));
  if (max == kNegInf) return;
  double sum = 0;
  for (double& sj : s) sum += sj = std::exp(sj - max);
  for (std::size_t j = 0; j < s.size(); ++j) {
    const double factor = dropout.empty() ? 1.0 : dropout[j];
    const double p = fp8 ? round_to(dtype, s[j]) / sum : round_to(dtype, s[j] / sum);
    add_scaled_value(v, b, static_cast<std::int64_t>(j), hk, p * factor, out);
  }
  for (double& o : out) o = round_to(output_dtype(dtype), o);
}

/// One row of O from its scores `s`, the textbook way in float64, and its LSE: the sampled
/// rows' reference (reference::forward computes every row, too slow at real sizes).
double exact_row(ConstView4 v, std::int64_t b, std::int64_t hk, const std::vector<double>& s,
                 std::vector<double>& out) {
  out.assign(static_cast<std::size_t>(v.shape[3]), 0.0);
  const double max = *std::max_element(s.begin(), s.end());
  if (max == kNegInf) return kNegInf;  // no visible key: O = 0, LSE = -inf
  double sum = 0;
  for (double sj : s) sum += std::exp(sj - max);
  for (std::size_t j = 0; j < s.size(); ++j) {
    add_scaled_value(v, b, static_cast<std::int64_t>(j), hk, std::exp(s[j] - max) / sum, out);
  }
  return max + std::log(sum);
}

/// O computed the plain way in `dtype` (see plain_row), in `c.layout`.
Tensor4 plain_attention(const ForwardCase& c, const Tensor4& q, const Tensor4& k,
                        const Tensor4& v) {
  const reference::Problem& p = c.problem;
  Tensor4 out = reference::zeros(p.o_shape(), c.layout);
  std::vector<double> s, row, dropout;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        row_scores(p, q.view(), k.view(), b, h, i, s);
        dropout.clear();
        for (std::int64_t j = 0; p.dropout && j < p.seqlen_k; ++j) {
          dropout.push_back(p.dropout(b, h, i, j));
        }
        plain_row(c.dtype, v.view(), b, p.kv_head(h), s, row, dropout);
        for (std::int64_t d = 0; d < p.value_dim(); ++d) {
          out(b, i, h, d) = row[static_cast<std::size_t>(d)];
        }
      }
    }
  }
  return out;
}

struct Inputs {
  RoundedTensor q, k, v;
};
Inputs make_inputs(const ForwardCase& c) {
  const reference::Problem& p = c.problem;
  return {rounded_random(p.q_shape(), c.layout, c.seed, c.dtype),
          rounded_random(p.kv_shape(), c.layout, c.seed + 1, c.dtype),
          rounded_random(p.v_shape(), c.layout, c.seed + 2, c.dtype)};
}

/// The bound on O's relative L2 error: twice that of plain attention in the input dtype, with a
/// tiny floor: when plain attention is exact to the last bit (a single key, say), the kernel
/// may still round differently in the last place.
double out_bound(double plain_error) { return std::max(2 * plain_error, 1e-6); }

/// LSE's check: `actual` (its rows that `expected` covers) against the reference and every
/// element of `all` written (-inf is a row with no visible key); or, when the case asks for no
/// LSE, `all` left untouched.
reference::CheckResult check_lse(const ForwardCase& c, const std::vector<float>& actual,
                                 const std::vector<double>& expected, const std::vector<float>& all,
                                 const std::string& label) {
  if (!c.write_lse) {
    reference::CheckResult result;
    result.ok = true;
    for (float x : all) result.ok &= std::isnan(x);  // untouched when not asked for
    return result;
  }
  // The LSE is computed in fp32 from exact inputs: only accumulation order and exp2/log2
  // approximations separate it from the reference.
  constexpr double kLseTolerance = 1e-4;
  reference::CheckResult result = reference::check_close(actual, expected, kLseTolerance, label);
  check_every_element(
      all, [](float x) { return std::isnan(x) || x == std::numeric_limits<float>::infinity(); },
      "LSE", result);
  return result;
}

/// The reference side of a case's verdicts, computed once for any number of runs: O and LSE in
/// float64 (every row, or with sample_rows the sampled rows in `rows` order) and the error of
/// plain attention on the same rows.
struct Expected {
  std::vector<SampledRow> rows;  // empty unless sampled
  std::vector<double> out;
  std::vector<double> lse;
  double plain_error = 0;
};

Expected full_expected(const ForwardCase& c, const Inputs& in) {
  auto expected = reference::forward(c.problem, in.q.values.view(), in.k.values.view(),
                                     in.v.values.view(), {}, c.layout);
  const Tensor4 plain = plain_attention(c, in.q.values, in.k.values, in.v.values);
  const double plain_error = reference::check_close(plain.values, expected.out.values, 1.0).rel_l2;
  return {{}, std::move(expected.out.values), std::move(expected.lse), plain_error};
}

/// The sampled rows' reference, computed here row by row (exact_row, and plain_row for the
/// bound): reference::forward computes every row.
Expected sampled_expected(const ForwardCase& c, const Inputs& in) {
  const reference::Problem& p = c.problem;
  if (p.dropout) throw std::invalid_argument("sampled rows do not model dropout: sample_rows 0");
  const ConstView4 q = in.q.values.view(), k = in.k.values.view(), v = in.v.values.view();
  Expected expected{spread_rows(c.sample_rows, p.batch, p.heads_q, p.seqlen_q), {}, {}, 0};
  std::vector<double> plain, s, exact_o, plain_o;
  for (const SampledRow& r : expected.rows) {
    const std::int64_t hk = p.kv_head(r.head);
    row_scores(p, q, k, r.batch, r.head, r.row, s);
    expected.lse.push_back(exact_row(v, r.batch, hk, s, exact_o));
    plain_row(c.dtype, v, r.batch, hk, s, plain_o);  // clobbers s
    expected.out.insert(expected.out.end(), exact_o.begin(), exact_o.end());
    plain.insert(plain.end(), plain_o.begin(), plain_o.end());
  }
  expected.plain_error = reference::check_close(plain, expected.out, 1.0).rel_l2;
  return expected;
}

/// What a run wrote: all of O (widened to double, in the case's layout) and of LSE.
struct Actual {
  std::vector<double> out;
  std::vector<float> lse;
};

/// The sampled rows of a run's O and LSE, in the order of `rows`.
Actual gather_rows(const ForwardCase& c, const std::vector<SampledRow>& rows,
                   const Actual& actual) {
  const reference::Problem& p = c.problem;
  Actual gathered{gather(actual.out, p.o_shape(), c.layout, rows), {}};
  for (const SampledRow& r : rows) {
    const std::int64_t lse_index = (r.batch * p.heads_q + r.head) * p.seqlen_q + r.row;
    gathered.lse.push_back(actual.lse[static_cast<std::size_t>(lse_index)]);
  }
  return gathered;
}

ForwardVerdict judge(const ForwardCase& c, const Expected& expected, const Actual& actual) {
  const bool sampled = c.sample_rows > 0;
  const Actual rows = sampled ? gather_rows(c, expected.rows, actual) : Actual{};
  const Actual& compared = sampled ? rows : actual;
  ForwardVerdict verdict;
  verdict.plain_error = expected.plain_error;
  verdict.out = reference::check_close(compared.out, expected.out, out_bound(expected.plain_error),
                                       sampled ? "O (sampled rows)" : "O");
  verdict.error = verdict.out.rel_l2;
  if (sampled) {  // the rows not compared must still have been written
    check_every_element_finite(actual.out, "O", verdict.out);
  }
  verdict.lse =
      check_lse(c, compared.lse, expected.lse, actual.lse, sampled ? "LSE (sampled rows)" : "LSE");
  verdict.ok = verdict.out.ok && verdict.lse.ok;
  return verdict;
}

/// Runs `c` on `runtime` with `config` (or the runtime's choice) on inputs `in`.
Actual run_kernel(Runtime& runtime, const ForwardCase& c, const Inputs& in,
                  const std::optional<kernels::ForwardConfig>& config) {
  const reference::Problem& p = c.problem;
  const auto out_count = static_cast<std::size_t>(p.batch * p.seqlen_q * p.heads_q * p.value_dim());
  const auto lse_count = static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q);

  // Outputs start as NaN, so an element the kernel never writes fails the check.
  DeviceBuffer q = upload_input(runtime, c.dtype, in.q.bits),
               k = upload_input(runtime, c.dtype, in.k.bits),
               v = upload_input(runtime, c.dtype, in.v.bits);
  DeviceBuffer o = upload(runtime, std::vector<std::uint16_t>(out_count, kPoison));
  std::vector<float> lse(lse_count, std::numeric_limits<float>::quiet_NaN());
  DeviceBuffer lse_buffer = upload(runtime, lse);

  const Attention a = c.attention();
  const flashjit::Layout layout = library_layout(c.layout);
  auto view = [&](DeviceBuffer& buffer, std::int64_t seqlen, std::int64_t heads,
                  std::int64_t head_dim, DType dtype) {
    return attention_tensor(buffer.data(), dtype, layout, p.batch, seqlen, heads, head_dim);
  };
  const TensorView lse_view =
      c.write_lse ? lse_tensor(static_cast<float*>(lse_buffer.data()), a) : TensorView{};
  const TensorView q_view = view(q, p.seqlen_q, p.heads_q, p.head_dim, c.dtype),
                   k_view = view(k, p.seqlen_k, p.heads_kv, p.head_dim, c.dtype),
                   v_view = view(v, p.seqlen_k, p.heads_kv, p.value_dim(), c.dtype),
                   o_view = view(o, p.seqlen_q, p.heads_q, p.value_dim(), output_dtype(c.dtype));
  if (config) {
    kernels::attention_forward(detail::backend_of(runtime), a, q_view, k_view, v_view, o_view,
                               lse_view, *config, nullptr);
  } else {
    runtime.forward(a, q_view, k_view, v_view, o_view, lse_view);
  }
  runtime.synchronize();

  std::vector<std::uint16_t> out_bits(out_count);
  runtime.copy_to_host(out_bits.data(), o.data(), out_count * sizeof(std::uint16_t));
  runtime.copy_to_host(lse.data(), lse_buffer.data(), lse_count * sizeof(float));
  return {widen(output_dtype(c.dtype), out_bits), std::move(lse)};
}

}  // namespace

std::string ForwardCase::name() const {
  const reference::Problem& p = problem;
  std::ostringstream s;
  s << "b" << p.batch << ".hq" << p.heads_q << ".hkv" << p.heads_kv << ".q" << p.seqlen_q << ".k"
    << p.seqlen_k << ".d" << p.head_dim;
  if (p.head_dim_v != 0) s << "v" << p.head_dim_v;
  s << "." << dtype_name(dtype) << "." << (layout == Layout::bshd ? "bshd" : "bhsd");
  if (p.causal) s << ".causal";
  if (p.window_left >= 0 || p.window_right >= 0) {
    s << ".window" << p.window_left << "," << p.window_right;
  }
  if (p.softcap > 0) s << ".softcap" << p.softcap;
  if (!p.score_mod_text.empty()) s << ".score_mod(" << p.score_mod_text << ")";
  if (!p.mask_mod_text.empty()) s << ".mask_mod(" << p.mask_mod_text << ")";
  if (p.softmax_scale) s << ".scale" << *p.softmax_scale;
  if (sample_rows > 0) s << ".rows" << sample_rows;
  return s.str();
}

Attention ForwardCase::attention() const {
  const reference::Problem& p = problem;
  Attention a;
  a.batch = p.batch;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.seqlen_q = p.seqlen_q;
  a.seqlen_k = p.seqlen_k;
  a.head_dim = p.head_dim;
  a.head_dim_v = p.head_dim_v;
  a.causal = p.causal;
  a.window_left = p.window_left;
  a.window_right = p.window_right;
  if (p.softmax_scale) a.scale = static_cast<float>(*p.softmax_scale);
  a.softcap = static_cast<float>(p.softcap);
  a.score_mod = p.score_mod_text;
  a.mask_mod = p.mask_mod_text;
  a.captures = captures;
  a.dropout_p = static_cast<float>(p.dropout_p);
  a.dropout_seed = p.dropout_seed;
  a.dropout_offset = p.dropout_offset;
  return a;
}

std::string ForwardVerdict::describe() const {
  std::ostringstream s;
  s << (ok ? "ok" : "FAILED") << ": O error " << error << " (plain " << plain_error << ", bound "
    << 2 * plain_error << ")\n  O:   " << out.describe() << "\n  LSE: " << lse.describe();
  return s.str();
}

double plain_attention_error(const ForwardCase& c) {
  const Inputs in = make_inputs(c);
  const auto expected = reference::forward(c.problem, in.q.values.view(), in.k.values.view(),
                                           in.v.values.view(), {}, c.layout);
  const Tensor4 plain = plain_attention(c, in.q.values, in.k.values, in.v.values);
  return reference::check_close(plain.values, expected.out.values, 1.0).rel_l2;
}

struct ForwardCaseRunner::State {
  ForwardCase c;
  Inputs in;
  Expected expected;
};

ForwardCaseRunner::ForwardCaseRunner(const ForwardCase& c) {
  Inputs in = make_inputs(c);
  Expected expected = c.sample_rows > 0 ? sampled_expected(c, in) : full_expected(c, in);
  state_ = std::make_unique<State>(State{c, std::move(in), std::move(expected)});
}

ForwardCaseRunner::~ForwardCaseRunner() = default;
ForwardCaseRunner::ForwardCaseRunner(ForwardCaseRunner&&) noexcept = default;
ForwardCaseRunner& ForwardCaseRunner::operator=(ForwardCaseRunner&&) noexcept = default;

ForwardVerdict ForwardCaseRunner::run(Runtime& runtime,
                                      const std::optional<kernels::ForwardConfig>& config) const {
  return judge(state_->c, state_->expected, run_kernel(runtime, state_->c, state_->in, config));
}

ForwardVerdict run_forward_case(Runtime& runtime, const ForwardCase& c,
                                const std::optional<kernels::ForwardConfig>& config) {
  return ForwardCaseRunner(c).run(runtime, config);
}

}  // namespace flashjit::testing
