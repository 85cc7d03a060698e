// `flashjit run --op attention-forward --sinks` (and attention-backward): the dense call with
// learnable attention sinks (random logits, one a query head) against the float64 reference
// whose denominators hold e^sink: O and LSE, and after the backward dQ, dK, dV and the sinks'
// gradient.
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "attention/check/attention_reference.hpp"
#include "attention/check/attention_run.hpp"
#include "cases/case_inputs.hpp"
#include "flashjit/error.hpp"
#include "run_support.hpp"

namespace flashjit::tools {
namespace {

using namespace testing::case_inputs;

// Relative L2 bounds of a 16-bit call against float64 (the outputs are rounded to 16 bits:
// about 2^-9 a value; the gradients sum more terms).
constexpr double kOutputBound = 1e-2;
constexpr double kGradientBound = 2e-2;

/// One line of the report and whether it passed.
bool report(const char* name, const reference::CheckResult& check, double bound) {
  std::printf("%-8s max abs error %.3g, relative L2 error %.3g (bound %.3g)\n", name, check.max_abs,
              check.rel_l2, bound);
  return check.ok && check.rel_l2 <= bound;
}

/// A run's problem (the case's, with random sinks), inputs rounded to its dtype, and the call.
class SinkRun {
 public:
  SinkRun(const testing::ForwardCase& c, Runtime& runtime, bool deterministic)
      : c_(c), problem_(c.problem), runtime_(runtime), attention_(c.attention()) {
    const reference::Tensor4 logits =
        reference::random_tensor({1, 1, problem_.heads_q, 1}, reference::Layout::bshd, c.seed + 7);
    for (double x : logits.values) sinks_.push_back(static_cast<float>(1.5 * x + 0.5));
    problem_.sinks.assign(sinks_.begin(), sinks_.end());
    q_ = rounded_random(problem_.q_shape(), c.layout, c.seed, c.dtype);
    k_ = rounded_random(problem_.kv_shape(), c.layout, c.seed + 1, c.dtype);
    v_ = rounded_random(problem_.v_shape(), c.layout, c.seed + 2, c.dtype);
    dout_ = rounded_random(problem_.o_shape(), c.layout, c.seed + 3, c.dtype);
    attention_.deterministic = deterministic;
    sinks_buffer_ = upload(runtime, sinks_);
    attention_.sinks = TensorView::contiguous(sinks_buffer_.data(), DType::f32, {problem_.heads_q});
  }

  /// The forward; its O and LSE against the reference.
  bool forward() {
    q_buffer_ = upload(runtime_, q_.bits), k_buffer_ = upload(runtime_, k_.bits);
    v_buffer_ = upload(runtime_, v_.bits);
    o_buffer_ = upload(runtime_, std::vector<std::uint16_t>(dout_.bits.size(), kPoison));
    lse_buffer_ = upload(runtime_, std::vector<float>(static_cast<std::size_t>(
                                       problem_.batch * problem_.heads_q * problem_.seqlen_q)));
    runtime_.forward(attention_, view(q_buffer_, 'q'), view(k_buffer_, 'k'), view(v_buffer_, 'v'),
                     view(o_buffer_, 'o'), lse_view());
    runtime_.synchronize();
    const reference::ForwardResult expected = reference::forward(
        problem_, q_.values.view(), k_.values.view(), v_.values.view(), {}, c_.layout);
    std::vector<float> lse(expected.lse.size());
    runtime_.copy_to_host(lse.data(), lse_buffer_.data(), lse.size() * sizeof(float));
    const bool ok = report("O:", check(o_buffer_, expected.out, "O", kOutputBound), kOutputBound);
    return report("LSE:", reference::check_close(lse, expected.lse, 1e-4, "LSE"), 1e-4) && ok;
  }

  /// The backward after forward(); dQ, dK, dV and the sinks' gradient against the reference.
  bool backward() {
    const DeviceBuffer dout = upload(runtime_, dout_.bits);
    const DeviceBuffer dq = upload(runtime_, q_.bits), dk = upload(runtime_, k_.bits),
                       dv = upload(runtime_, v_.bits);
    const DeviceBuffer sinks_grad = upload(
        runtime_, std::vector<float>(sinks_.size(), std::numeric_limits<float>::quiet_NaN()));
    Attention a = attention_;
    a.sinks_grad = TensorView::contiguous(sinks_grad.data(), DType::f32, {problem_.heads_q});
    runtime_.backward(a, view(q_buffer_, 'q'), view(k_buffer_, 'k'), view(v_buffer_, 'v'),
                      view(o_buffer_, 'o'), lse_view(), view(dout, 'o'), view(dq, 'q'),
                      view(dk, 'k'), view(dv, 'v'));
    runtime_.synchronize();
    const reference::Gradients want =
        reference::backward(problem_, q_.values.view(), k_.values.view(), v_.values.view(),
                            dout_.values.view(), c_.layout);
    bool ok = report("dQ:", check(dq, want.dq, "dQ", kGradientBound), kGradientBound);
    ok &= report("dK:", check(dk, want.dk, "dK", kGradientBound), kGradientBound);
    ok &= report("dV:", check(dv, want.dv, "dV", kGradientBound), kGradientBound);
    std::vector<float> got(sinks_.size());
    runtime_.copy_to_host(got.data(), sinks_grad.data(), got.size() * sizeof(float));
    const std::vector<double> expected = reference::sinks_gradient(
        problem_, q_.values.view(), k_.values.view(), v_.values.view(), dout_.values.view());
    return report("dsinks:", reference::check_close(got, expected, kGradientBound, "dsinks"),
                  kGradientBound) &&
           ok;
  }

  const reference::Problem& problem() const { return problem_; }

 private:
  /// A buffer viewed as q, k, v or o (dq, dk, dv, dout likewise) of the call.
  TensorView view(const DeviceBuffer& buffer, char which) const {
    const reference::Problem& p = problem_;
    const bool query = which == 'q' || which == 'o';
    const std::int64_t dim = which == 'q' || which == 'k' ? p.head_dim : p.value_dim();
    return attention_tensor(buffer.data(), c_.dtype, library_layout(c_.layout), p.batch,
                            query ? p.seqlen_q : p.seqlen_k, query ? p.heads_q : p.heads_kv, dim);
  }
  TensorView lse_view() const {
    return lse_tensor(static_cast<float*>(lse_buffer_.data()), attention_);
  }
  /// `buffer` (16-bit, as `expected` is laid out) against `expected`.
  reference::CheckResult check(const DeviceBuffer& buffer, const reference::Tensor4& expected,
                               const char* label, double bound) const {
    std::vector<std::uint16_t> bits(expected.values.size());
    runtime_.copy_to_host(bits.data(), buffer.data(), bits.size() * sizeof(std::uint16_t));
    return reference::check_close(widen(c_.dtype, bits), expected.values, bound, label);
  }

  const testing::ForwardCase& c_;
  reference::Problem problem_;
  Runtime& runtime_;
  Attention attention_;
  std::vector<float> sinks_;
  RoundedTensor q_, k_, v_, dout_;
  DeviceBuffer sinks_buffer_, q_buffer_, k_buffer_, v_buffer_, o_buffer_, lse_buffer_;
};

}  // namespace

int run_attention_with_sinks(const RunContext& context, const AttentionRunFlags& flags,
                             bool backward) {
  if (!flags.config.empty() || !flags.score_mod.empty() || !flags.mask_mod.empty()) {
    throw InvalidArgument("--sinks",
                          "runs the library's own config without modifiers: not with "
                          "--config, --score-mod or --mask-mod");
  }
  const testing::ForwardCase c = forward_case(context, flags);
  Runtime runtime = context.open_runtime();
  SinkRun run(c, runtime, flags.deterministic);
  const reference::Problem& p = run.problem();
  std::printf(
      "shape:   batch %lld, heads %lld (kv %lld), seqlen_q %lld, seqlen_k %lld, head_dim "
      "%lld, %s%s, learnable sinks\n",
      static_cast<long long>(p.batch), static_cast<long long>(p.heads_q),
      static_cast<long long>(p.heads_kv), static_cast<long long>(p.seqlen_q),
      static_cast<long long>(p.seqlen_k), static_cast<long long>(p.head_dim),
      std::string(dtype_name(c.dtype)).c_str(), p.causal ? ", causal" : "");
  const auto start = std::chrono::steady_clock::now();
  bool ok = run.forward();
  if (backward) ok = run.backward() && ok;
  return conclude(ok, "an output is past its bound (above)",
                  backward ? "forward, backward and check" : "kernel and check", elapsed_ms(start));
}

}  // namespace flashjit::tools
