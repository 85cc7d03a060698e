#include "multiscale/multiscale_case.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <sstream>

#include "cases/case_inputs.hpp"
#include "flashjit/attention.hpp"

namespace flashjit::testing {
namespace {

using namespace case_inputs;
using reference::Layout;
using reference::Shape4;

constexpr float kPoisonFloat = std::numeric_limits<float>::quiet_NaN();

/// The relative L2 error bound of an output: twice the plain computation's, with a floor for
/// outputs the plain computation gets exactly.
double bound(const std::vector<double>& plain, const std::vector<double>& exact) {
  return std::max(2 * reference::check_close(plain, exact, 1.0).rel_l2, 1e-6);
}

/// The case's 16-bit tensors as the reference reads them, and their bits.
struct Inputs {
  RoundedTensor q, k, v, dout;
};

/// A buffer of `count` 16-bit elements (poisoned) or floats (poisoned), and a view of it.
struct Output16 {
  DeviceBuffer buffer;
  TensorView view;
  std::vector<double> read(Runtime& runtime, DType dtype) const {
    std::vector<std::uint16_t> bits(buffer.size() / 2);
    runtime.copy_to_host(bits.data(), buffer.data(), buffer.size());
    return widen(dtype, bits);
  }
};

Output16 head_output(Runtime& runtime, DType dtype, std::int64_t b, std::int64_t s, std::int64_t h,
                     std::int64_t d) {
  Output16 out{upload(runtime, std::vector<std::uint16_t>(std::size_t(b * s * h * d), kPoison)),
               {}};
  out.view = attention_tensor(out.buffer.data(), dtype, flashjit::Layout::bshd, b, s, h, d);
  return out;
}

std::vector<double> read_floats(Runtime& runtime, const DeviceBuffer& buffer) {
  std::vector<float> values(buffer.size() / sizeof(float));
  runtime.copy_to_host(values.data(), buffer.data(), buffer.size());
  return {values.begin(), values.end()};
}

void add_check(MultiScaleVerdict& verdict, const std::string& name, const std::vector<double>& got,
               const std::vector<double>& exact, const std::vector<double>& plain) {
  reference::CheckResult result = reference::check_close(got, exact, bound(plain, exact), name);
  check_every_element_finite(got, name, result);
  verdict.ok = verdict.ok && result.ok;
  verdict.checks.emplace_back(name, std::move(result));
}

}  // namespace

std::string MultiScaleCase::name() const {
  std::ostringstream s;
  s << "b" << batch << ".hq" << heads_q << ".hkv" << heads_kv << ".q" << seqlen_q << ".k"
    << seqlen_k << ".d" << head_dim << "." << dtype_name(dtype) << "."
    << (mask == MultiScaleMask::decay ? "decay" : "tensor") << (backward ? ".backward" : "")
    << (mask_gradient ? ".dmask" : "");
  return s.str();
}

MultiScaleAttention MultiScaleCase::attention() const {
  return {batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, scale, mask};
}

reference::MultiScaleProblem MultiScaleCase::problem() const {
  reference::MultiScaleProblem p;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.scale = scale != 0.0f ? double(scale) : double(float(1.0 / std::sqrt(double(head_dim))));
  p.decay = mask == MultiScaleMask::decay;
  if (p.decay) {
    for (std::int64_t h = 0; h < heads_q; ++h) {  // as fp32
      const double rate = gammas.empty() ? 1.0 - std::exp2(-5.0 - double(h % 8))
                                         : gammas[static_cast<std::size_t>(h) % gammas.size()];
      p.gammas.push_back(double(float(rate)));
    }
  } else {
    std::mt19937_64 rng(seed + 7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    p.mask.resize(static_cast<std::size_t>(heads_q * seqlen_q * seqlen_k));
    for (double& m : p.mask) m = double(uniform(rng));
  }
  return p;
}

MultiScaleVerdict run_multiscale_case(Runtime& runtime, const MultiScaleCase& c) {
  const reference::MultiScaleProblem p = c.problem();
  const MultiScaleAttention a = c.attention();
  const Shape4 q_shape{c.batch, c.seqlen_q, c.heads_q, c.head_dim};
  const Shape4 k_shape{c.batch, c.seqlen_k, c.heads_kv, c.head_dim};
  const Inputs in{rounded_random(q_shape, Layout::bshd, c.seed, c.dtype),
                  rounded_random(k_shape, Layout::bshd, c.seed + 1, c.dtype),
                  rounded_random(k_shape, Layout::bshd, c.seed + 2, c.dtype),
                  rounded_random(q_shape, Layout::bshd, c.seed + 3, c.dtype)};
  const auto view_of = [&](const DeviceBuffer& b, const Shape4& s) {
    return attention_tensor(b.data(), c.dtype, flashjit::Layout::bshd, s[0], s[1], s[2], s[3]);
  };
  const DeviceBuffer q = upload(runtime, in.q.bits), k = upload(runtime, in.k.bits),
                     v = upload(runtime, in.v.bits), dout = upload(runtime, in.dout.bits);
  const std::vector<double>& mask_values = p.decay ? p.gammas : p.mask;
  const DeviceBuffer mask =
      upload(runtime, std::vector<float>(mask_values.begin(), mask_values.end()));
  const TensorView mask_view = multiscale_mask_tensor(static_cast<float*>(mask.data()), a);
  const Output16 o = head_output(runtime, c.dtype, c.batch, c.seqlen_q, c.heads_q, c.head_dim);
  const DeviceBuffer rowsum = upload(
      runtime, std::vector<float>(std::size_t(c.batch * c.heads_q * c.seqlen_q), kPoisonFloat));
  const TensorView rowsum_view = multiscale_rowsum_tensor(static_cast<float*>(rowsum.data()), a);
  runtime.multiscale_forward(a, view_of(q, q_shape), view_of(k, k_shape), view_of(v, k_shape),
                             mask_view, o.view, rowsum_view);
  runtime.synchronize(nullptr);

  MultiScaleVerdict verdict;
  verdict.ok = true;
  const auto rounded = [&](double x) { return round_to(c.dtype, x); };
  const reference::MultiScaleOutputs exact =
      reference::multiscale_forward(p, in.q.values.view(), in.k.values.view(), in.v.values.view());
  const reference::MultiScaleOutputs plain = reference::multiscale_forward(
      p, in.q.values.view(), in.k.values.view(), in.v.values.view(), rounded);
  add_check(verdict, "O", o.read(runtime, c.dtype), exact.out.values, plain.out.values);
  add_check(verdict, "r", read_floats(runtime, rowsum), exact.rowsum, plain.rowsum);
  if (!c.backward) return verdict;

  const Output16 dq = head_output(runtime, c.dtype, c.batch, c.seqlen_q, c.heads_q, c.head_dim);
  const Output16 dk = head_output(runtime, c.dtype, c.batch, c.seqlen_k, c.heads_kv, c.head_dim);
  const Output16 dv = head_output(runtime, c.dtype, c.batch, c.seqlen_k, c.heads_kv, c.head_dim);
  const bool with_dmask = c.mask_gradient && c.mask == MultiScaleMask::tensor;
  std::optional<DeviceBuffer> dmask;
  if (with_dmask) dmask = upload(runtime, std::vector<float>(p.mask.size(), kPoisonFloat));
  const TensorView dmask_view =
      dmask ? multiscale_mask_tensor(static_cast<float*>(dmask->data()), a) : TensorView{};
  runtime.multiscale_backward(a, view_of(q, q_shape), view_of(k, k_shape), view_of(v, k_shape),
                              mask_view, o.view, rowsum_view, view_of(dout, q_shape), dq.view,
                              dk.view, dv.view, dmask_view);
  runtime.synchronize(nullptr);
  const reference::MultiScaleGradients exact_g = reference::multiscale_backward(
      p, in.q.values.view(), in.k.values.view(), in.v.values.view(), in.dout.values.view());
  const reference::MultiScaleGradients plain_g =
      reference::multiscale_backward(p, in.q.values.view(), in.k.values.view(), in.v.values.view(),
                                     in.dout.values.view(), rounded);
  add_check(verdict, "dQ", dq.read(runtime, c.dtype), exact_g.dq.values, plain_g.dq.values);
  add_check(verdict, "dK", dk.read(runtime, c.dtype), exact_g.dk.values, plain_g.dk.values);
  add_check(verdict, "dV", dv.read(runtime, c.dtype), exact_g.dv.values, plain_g.dv.values);
  if (with_dmask) {
    verdict.dmask = read_floats(runtime, *dmask);
    add_check(verdict, "dM", verdict.dmask, exact_g.dmask, plain_g.dmask);
  }
  return verdict;
}

std::string MultiScaleVerdict::describe() const {
  std::string text = ok ? "ok" : "FAILED";
  for (const auto& [name, result] : checks) text += "\n  " + name + ": " + result.describe();
  return text;
}

}  // namespace flashjit::testing
