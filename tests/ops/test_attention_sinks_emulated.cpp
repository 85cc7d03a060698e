// Learnable attention sinks (Attention::sinks, sinks_grad) on the CPU emulator, against a
// float64 reference whose softmax denominators hold e^(s_h): the dense forward (with and
// without the caller's lse), packed sequences, decoding split across CTAs (the sink counted
// once), the backward's dQ, dK, dV, and the sinks' gradient, itself checked against float64
// central differences of the loss; bit-identical reruns; bad sinks named before any launch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "flashjit/error.hpp"
#include "support/emulator_runtime.hpp"
#include "tile/numeric.cuh"

namespace flashjit::testing {
namespace {

struct Shape {
  std::int64_t batch = 2, heads_q = 4, heads_kv = 2, seqlen_q = 7, seqlen_k = 11, head_dim = 64;
  bool causal = false;
  std::int64_t q_elements() const { return batch * seqlen_q * heads_q * head_dim; }
  std::int64_t k_elements() const { return batch * seqlen_k * heads_kv * head_dim; }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }
};

/// bf16 values (as floats, exactly representable) from a fixed generator.
std::vector<float> values(std::int64_t count, std::uint32_t seed, float amplitude = 1.0f) {
  std::vector<float> out(static_cast<std::size_t>(count));
  std::uint32_t state = seed * 2654435761u + 1;
  for (float& x : out) {
    state = state * 1664525u + 1013904223u;
    const float uniform = static_cast<float>(state >> 8) / 16777216.0f;
    x = to_float(from_float<bfloat16_t>(amplitude * (2.0f * uniform - 1.0f)));
  }
  return out;
}

/// The float64 forward with sinks of one query row: its probabilities over the keys and its
/// LSE (the sink's term included).
struct RowReference {
  std::vector<double> p;
  double lse;
};
RowReference row_reference(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                           std::int64_t b, std::int64_t h, std::int64_t i, double sink) {
  const std::int64_t kv = h / (s.heads_q / s.heads_kv);
  std::vector<double> scores(static_cast<std::size_t>(s.seqlen_k), -INFINITY);
  double top = sink;
  for (std::int64_t j = 0; j < s.seqlen_k; ++j) {
    if (s.causal && j > i + s.seqlen_k - s.seqlen_q) continue;
    double dot = 0;
    for (std::int64_t d = 0; d < s.head_dim; ++d) {
      dot += static_cast<double>(q[((b * s.seqlen_q + i) * s.heads_q + h) * s.head_dim + d]) *
             k[((b * s.seqlen_k + j) * s.heads_kv + kv) * s.head_dim + d];
    }
    scores[j] = dot * s.scale();
    top = std::max(top, scores[j]);
  }
  double sum = std::exp(sink - top);
  for (double x : scores) sum += std::exp(x - top);
  RowReference r{std::vector<double>(scores.size()), top + std::log(sum)};
  for (std::size_t j = 0; j < scores.size(); ++j) r.p[j] = std::exp(scores[j] - r.lse);
  return r;
}

/// O of every row in float64, [batch, seqlen_q, heads_q, head_dim].
std::vector<double> reference_o(const Shape& s, const std::vector<float>& q,
                                const std::vector<float>& k, const std::vector<float>& v,
                                const std::vector<double>& sinks) {
  std::vector<double> o(static_cast<std::size_t>(s.q_elements()));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t i = 0; i < s.seqlen_q; ++i) {
      for (std::int64_t h = 0; h < s.heads_q; ++h) {
        const RowReference r = row_reference(s, q, k, b, h, i, sinks[h]);
        const std::int64_t kv = h / (s.heads_q / s.heads_kv);
        for (std::int64_t j = 0; j < s.seqlen_k; ++j) {
          for (std::int64_t d = 0; d < s.head_dim; ++d) {
            o[((b * s.seqlen_q + i) * s.heads_q + h) * s.head_dim + d] +=
                r.p[j] * v[((b * s.seqlen_k + j) * s.heads_kv + kv) * s.head_dim + d];
          }
        }
      }
    }
  }
  return o;
}

/// The loss Σ dout ∘ O in float64, whose gradient the backward computes.
double loss(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
            const std::vector<float>& v, const std::vector<double>& sinks,
            const std::vector<float>& dout) {
  const std::vector<double> o = reference_o(s, q, k, v, sinks);
  double total = 0;
  for (std::size_t e = 0; e < o.size(); ++e) total += o[e] * dout[e];
  return total;
}

/// dQ, dK, dV of the loss in float64: the usual formulas with the sinks' probabilities.
struct Gradients {
  std::vector<double> dq, dk, dv;
};
Gradients reference_gradients(const Shape& s, const std::vector<float>& q,
                              const std::vector<float>& k, const std::vector<float>& v,
                              const std::vector<double>& sinks, const std::vector<float>& dout) {
  Gradients g{std::vector<double>(q.size()), std::vector<double>(k.size()),
              std::vector<double>(v.size())};
  const std::vector<double> o = reference_o(s, q, k, v, sinks);
  const auto at_q = [&](std::int64_t b, std::int64_t i, std::int64_t h) {
    return ((b * s.seqlen_q + i) * s.heads_q + h) * s.head_dim;
  };
  const auto at_k = [&](std::int64_t b, std::int64_t j, std::int64_t h) {
    return ((b * s.seqlen_k + j) * s.heads_kv + h) * s.head_dim;
  };
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t i = 0; i < s.seqlen_q; ++i) {
      for (std::int64_t h = 0; h < s.heads_q; ++h) {
        const RowReference r = row_reference(s, q, k, b, h, i, sinks[h]);
        const std::int64_t kv = h / (s.heads_q / s.heads_kv), qi = at_q(b, i, h);
        double delta = 0;  // D_i = dO_i · O_i
        for (std::int64_t d = 0; d < s.head_dim; ++d) delta += dout[qi + d] * o[qi + d];
        for (std::int64_t j = 0; j < s.seqlen_k; ++j) {
          if (r.p[j] == 0) continue;
          const std::int64_t kj = at_k(b, j, kv);
          double dp = 0;
          for (std::int64_t d = 0; d < s.head_dim; ++d) dp += dout[qi + d] * v[kj + d];
          const double ds = r.p[j] * (dp - delta) * s.scale();
          for (std::int64_t d = 0; d < s.head_dim; ++d) {
            g.dq[qi + d] += ds * k[kj + d];
            g.dk[kj + d] += ds * q[qi + d];
            g.dv[kj + d] += r.p[j] * dout[qi + d];
          }
        }
      }
    }
  }
  return g;
}

/// A host array in the emulator's memory, as bf16 or fp32.
struct Device {
  DeviceBuffer buffer;
  TensorView view;
};
Device upload(const std::vector<float>& host, DType dtype,
              std::initializer_list<std::int64_t> shape) {
  Runtime& runtime = emulator();
  std::vector<bfloat16_t> narrowed;
  for (float x : host) narrowed.push_back(from_float<bfloat16_t>(x));
  const std::size_t bytes = host.size() * (dtype == DType::bf16 ? 2 : 4);
  DeviceBuffer buffer = runtime.allocate(std::max<std::size_t>(bytes, 4));
  runtime.copy_to_device(buffer.data(),
                         dtype == DType::bf16 ? static_cast<const void*>(narrowed.data())
                                              : static_cast<const void*>(host.data()),
                         bytes);
  const TensorView view = TensorView::contiguous(buffer.data(), dtype, shape);
  return {std::move(buffer), view};
}
std::vector<float> download(const Device& d) {
  const auto count = static_cast<std::size_t>(d.view.numel());
  std::vector<float> out(count);
  if (d.view.dtype == DType::f32) {
    emulator().copy_to_host(out.data(), d.buffer.data(), count * 4);
  } else {
    std::vector<bfloat16_t> raw(count);
    emulator().copy_to_host(raw.data(), d.buffer.data(), count * 2);
    for (std::size_t e = 0; e < count; ++e) out[e] = to_float(raw[e]);
  }
  return out;
}

/// The largest |got − want| over |want| + 1 (a relative error near 1, absolute near 0).
double worst_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t e = 0; e < want.size(); ++e) {
    worst = std::max(worst, std::abs(got[e] - want[e]) / (std::abs(want[e]) + 1.0));
  }
  return worst;
}

/// One problem's inputs on the host and in the emulator's memory.
struct Problem {
  Shape s;
  std::vector<float> q, k, v, dout, sinks;
  Device dq_, dk_, dv_, q_, k_, v_, o_, lse_, dout_, sinks_, grad_;
  Attention attention;

  explicit Problem(const Shape& shape) : s(shape) {
    q = values(s.q_elements(), 1), k = values(s.k_elements(), 2), v = values(s.k_elements(), 3);
    dout = values(s.q_elements(), 4);
    sinks = values(s.heads_q, 5, 2.0f);  // around the scores' own size
    const auto qs = {s.batch, s.seqlen_q, s.heads_q, s.head_dim};
    const auto ks = {s.batch, s.seqlen_k, s.heads_kv, s.head_dim};
    q_ = upload(q, DType::bf16, qs), k_ = upload(k, DType::bf16, ks);
    v_ = upload(v, DType::bf16, ks), dout_ = upload(dout, DType::bf16, qs);
    o_ = upload(std::vector<float>(q.size()), DType::bf16, qs);
    dq_ = upload(std::vector<float>(q.size()), DType::bf16, qs);
    dk_ = upload(std::vector<float>(k.size()), DType::bf16, ks);
    dv_ = upload(std::vector<float>(k.size()), DType::bf16, ks);
    lse_ = upload(std::vector<float>(static_cast<std::size_t>(s.batch * s.heads_q * s.seqlen_q)),
                  DType::f32, {s.batch, s.heads_q, s.seqlen_q});
    sinks_ = upload(sinks, DType::f32, {s.heads_q});
    grad_ = upload(std::vector<float>(sinks.size()), DType::f32, {s.heads_q});
    attention = Attention{.batch = s.batch,
                          .heads_q = s.heads_q,
                          .heads_kv = s.heads_kv,
                          .seqlen_q = s.seqlen_q,
                          .seqlen_k = s.seqlen_k,
                          .head_dim = s.head_dim,
                          .causal = s.causal};
    attention.sinks = sinks_.view;
  }
  std::vector<double> sink_logits() const { return {sinks.begin(), sinks.end()}; }
  void forward(bool with_lse = true) {
    emulator().forward(attention, q_.view, k_.view, v_.view, o_.view,
                       with_lse ? lse_.view : TensorView{});
  }
  void backward() {
    Attention call = attention;
    call.sinks_grad = grad_.view;
    emulator().backward(call, q_.view, k_.view, v_.view, o_.view, lse_.view, dout_.view, dq_.view,
                        dk_.view, dv_.view);
  }
};

}  // namespace

TEST_CASE("sinks join every row's softmax denominator: o and lse against float64") {
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    Problem p(Shape{.causal = causal});
    p.forward();
    const std::vector<double> want = reference_o(p.s, p.q, p.k, p.v, p.sink_logits());
    CHECK(worst_error(download(p.o_), want) < 1e-2);
    const std::vector<float> lse = download(p.lse_);
    for (std::int64_t b = 0; b < p.s.batch; ++b) {
      for (std::int64_t h = 0; h < p.s.heads_q; ++h) {
        for (std::int64_t i = 0; i < p.s.seqlen_q; ++i) {
          const double expected = row_reference(p.s, p.q, p.k, b, h, i, p.sinks[h]).lse;
          CHECK(lse[(b * p.s.heads_q + h) * p.s.seqlen_q + i] ==
                doctest::Approx(expected).epsilon(1e-4));
        }
      }
    }
    // The sinks change the result (a test of the reference as much as of the kernels).
    CHECK(worst_error(download(p.o_),
                      reference_o(p.s, p.q, p.k, p.v, std::vector<double>(4, -INFINITY))) > 1e-2);
  }
}

TEST_CASE("a forward with sinks that skips lse gives the same o") {
  Problem p(Shape{.causal = true});
  p.forward(true);
  const std::vector<float> with_lse = download(p.o_);
  p.forward(false);
  CHECK(download(p.o_) == with_lse);
}

TEST_CASE("rows that see no key get o = 0 and lse = the sink") {
  // Causal with seqlen_q > seqlen_k: the first rows see no key.
  Problem p(Shape{.seqlen_q = 9, .seqlen_k = 4, .causal = true});
  p.forward();
  const std::vector<float> o = download(p.o_), lse = download(p.lse_);
  for (std::int64_t h = 0; h < p.s.heads_q; ++h) {
    CHECK(lse[h * p.s.seqlen_q] == doctest::Approx(p.sinks[h]));
    CHECK(o[h * p.s.head_dim] == 0.0f);
  }
  CHECK(worst_error(o, reference_o(p.s, p.q, p.k, p.v, p.sink_logits())) < 1e-2);
}

/// int32 indices in the emulator's memory.
Device upload_indices(const std::vector<std::int32_t>& host) {
  DeviceBuffer buffer = emulator().allocate(host.size() * 4);
  emulator().copy_to_device(buffer.data(), host.data(), host.size() * 4);
  const TensorView view =
      TensorView::contiguous(buffer.data(), DType::i32, {static_cast<std::int64_t>(host.size())});
  return {std::move(buffer), view};
}

TEST_CASE("packed sequences with sinks, forward and backward: the dense call's results") {
  // Full-length sequences packed back to back are the dense tensors' own memory.
  Problem p(Shape{.causal = true});
  const Shape& s = p.s;
  const std::int64_t total_q = s.batch * s.seqlen_q, total_k = s.batch * s.seqlen_k;
  const Device cu_q = upload_indices({0, 7, 14}), cu_k = upload_indices({0, 11, 22});
  Sequences sequences;
  sequences.cu_seqlens_q = cu_q.view;
  sequences.cu_seqlens_k = cu_k.view;
  const auto packed = [](const Device& d, std::int64_t rows) {
    return TensorView::contiguous(d.buffer.data(), d.view.dtype,
                                  {rows, d.view.shape[2], d.view.shape[3]});
  };
  Device lse = upload(std::vector<float>(static_cast<std::size_t>(s.heads_q * total_q)), DType::f32,
                      {s.heads_q, total_q});
  emulator().forward(p.attention, sequences, packed(p.q_, total_q), packed(p.k_, total_k),
                     packed(p.v_, total_k), packed(p.o_, total_q), lse.view);
  CHECK(worst_error(download(p.o_), reference_o(s, p.q, p.k, p.v, p.sink_logits())) < 1e-2);
  const std::vector<float> lse_packed = download(lse);
  CHECK(lse_packed[1] ==
        doctest::Approx(row_reference(s, p.q, p.k, 0, 0, 1, p.sinks[0]).lse).epsilon(1e-4));
  Attention call = p.attention;
  call.sinks_grad = p.grad_.view;
  emulator().backward(call, sequences, packed(p.q_, total_q), packed(p.k_, total_k),
                      packed(p.v_, total_k), packed(p.o_, total_q), lse.view,
                      packed(p.dout_, total_q), packed(p.dq_, total_q), packed(p.dk_, total_k),
                      packed(p.dv_, total_k));
  const std::vector<float> packed_grad = download(p.grad_);
  p.forward();
  p.backward();
  const std::vector<float> dense_grad = download(p.grad_);
  for (std::size_t h = 0; h < dense_grad.size(); ++h) {
    CHECK(packed_grad[h] == doctest::Approx(dense_grad[h]).epsilon(1e-5));
  }
}

TEST_CASE("decoding split across CTAs counts the sink once") {
  Problem p(Shape{.seqlen_q = 1, .seqlen_k = 40});
  const Device seqlens = upload_indices({40, 40});
  for (int splits : {0, 3}) {
    CAPTURE(splits);
    Sequences sequences;
    sequences.seqlens_k = seqlens.view;
    sequences.splits = splits;
    emulator().forward(p.attention, sequences, p.q_.view, p.k_.view, p.v_.view, p.o_.view,
                       p.lse_.view);
    CHECK(worst_error(download(p.o_), reference_o(p.s, p.q, p.k, p.v, p.sink_logits())) < 1e-2);
    CHECK(download(p.lse_)[0] ==
          doctest::Approx(row_reference(p.s, p.q, p.k, 0, 0, 0, p.sinks[0]).lse).epsilon(1e-4));
  }
}

TEST_CASE("the backward with sinks: dq, dk, dv and the sinks' gradient against float64") {
  // The last shape's 140 rows a head are three chunks of the gradient's partial sums.
  for (const Shape& shape :
       {Shape{}, Shape{.causal = true}, Shape{.seqlen_q = 70, .seqlen_k = 80, .causal = true}}) {
    CAPTURE(shape.seqlen_q);
    CAPTURE(shape.causal);
    Problem p(shape);
    p.forward();
    p.backward();
    const std::vector<double> sinks = p.sink_logits();
    const Gradients want = reference_gradients(p.s, p.q, p.k, p.v, sinks, p.dout);
    CHECK(worst_error(download(p.dq_), want.dq) < 2e-2);
    CHECK(worst_error(download(p.dk_), want.dk) < 2e-2);
    CHECK(worst_error(download(p.dv_), want.dv) < 2e-2);
    // ∂L/∂s_h by central differences of the float64 loss.
    const std::vector<float> grad = download(p.grad_);
    for (std::int64_t h = 0; h < p.s.heads_q; ++h) {
      constexpr double kStep = 1e-5;
      std::vector<double> up = sinks, down = sinks;
      up[h] += kStep, down[h] -= kStep;
      const double numeric =
          (loss(p.s, p.q, p.k, p.v, up, p.dout) - loss(p.s, p.q, p.k, p.v, down, p.dout)) /
          (2 * kStep);
      CAPTURE(h);
      CHECK(std::abs(grad[h] - numeric) < 2e-2 * (std::abs(numeric) + 1.0));
    }
  }
}

TEST_CASE("the sinks' gradient is bit-identical between runs") {
  Problem p(Shape{});
  p.forward();
  p.backward();
  const std::vector<float> first = download(p.grad_);
  p.backward();
  CHECK(download(p.grad_) == first);
}

TEST_CASE("bad sinks are named before anything is launched") {
  Problem p(Shape{});
  const std::vector<float> before = download(p.o_);
  Attention wrong = p.attention;
  wrong.sinks = TensorView::contiguous(p.sinks_.buffer.data(), DType::f32, {3});
  CHECK_THROWS_WITH_AS(
      emulator().forward(wrong, p.q_.view, p.k_.view, p.v_.view, p.o_.view, p.lse_.view),
      doctest::Contains("attention.sinks.shape"), InvalidArgument);
  wrong.sinks = TensorView::contiguous(p.q_.buffer.data(), DType::bf16, {4});
  CHECK_THROWS_WITH_AS(
      emulator().forward(wrong, p.q_.view, p.k_.view, p.v_.view, p.o_.view, p.lse_.view),
      doctest::Contains("must be fp32"), InvalidArgument);
  CHECK(download(p.o_) == before);
  Attention no_sinks = p.attention;
  no_sinks.sinks = {};
  no_sinks.sinks_grad = p.grad_.view;
  CHECK_THROWS_WITH_AS(
      emulator().backward(no_sinks, p.q_.view, p.k_.view, p.v_.view, p.o_.view, p.lse_.view,
                          p.dout_.view, p.dq_.view, p.dk_.view, p.dv_.view),
      doctest::Contains("attention.sinks_grad"), InvalidArgument);
}

}  // namespace flashjit::testing
