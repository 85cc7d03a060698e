// Captured tensors (Attention::captures) read by score and mask modifiers, on the CPU emulator:
// a T5-style relative-position bias from a table, document ids of packed documents, in the
// forward (with and without a block mask built from them) and the backward, against the
// float64 reference reading host copies of the same tensors; and the named errors for missing,
// misnamed and malformed captures, with nothing launched.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/check/attention_case.hpp"
#include "attention/check/backward_case.hpp"
#include "flashjit/error.hpp"
#include "support/emulator_runtime.hpp"
#include "support/forward_case_builders.hpp"

namespace flashjit::testing {
namespace {

/// A capture's values in the runtime's memory and on the host.
template <class T>
struct Captured {
  std::vector<T> host;
  DeviceBuffer buffer;
  TensorView view;
};

template <class T>
Captured<T> upload(std::vector<T> values, DType dtype, std::initializer_list<std::int64_t> shape,
                   Runtime& runtime = emulator()) {
  const std::size_t bytes = values.size() * sizeof(T);
  DeviceBuffer buffer = runtime.allocate(bytes);
  runtime.copy_to_device(buffer.data(), values.data(), bytes);
  const TensorView view = TensorView::contiguous(buffer.data(), dtype, shape);
  return {std::move(values), std::move(buffer), view};
}

/// A backward case of the forward builders' shape.
BackwardCase backward_case(std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seqlen,
                           std::int64_t head_dim) {
  BackwardCase c;
  c.problem = make_case(heads_q, heads_kv, seqlen, seqlen, head_dim).problem;
  return c;
}

/// A relative-position bias per query head, [heads, 2 · span - 1]: entry (h, d + span - 1) for
/// the offset d = q_idx - kv_idx in (-span, span).
Captured<float> bias_table(std::int64_t heads, std::int64_t span, Runtime& runtime = emulator()) {
  std::vector<float> values(static_cast<std::size_t>(heads * (2 * span - 1)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = 0.5f * static_cast<float>((i * 7919) % 13) / 13.0f - 0.25f;
  }
  return upload(std::move(values), DType::f32, {heads, 2 * span - 1}, runtime);
}

/// Document ids of `batch` packed sequences of `seqlen` tokens, int32 [batch, seqlen]: runs of
/// lengths that differ per sequence.
Captured<std::int32_t> document_ids(std::int64_t batch, std::int64_t seqlen) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * seqlen));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < seqlen; ++i) {
      ids[static_cast<std::size_t>(b * seqlen + i)] = static_cast<std::int32_t>(i / (23 + 9 * b));
    }
  }
  return upload(std::move(ids), DType::i32, {batch, seqlen});
}

constexpr const char* kBiasMod = "score + bias[h][q_idx - kv_idx + 59]";
constexpr const char* kDocumentMask = "doc[b][q_idx] == doc[b][kv_idx]";

/// The problem's modifiers reading host copies of `bias` (span 60) and `doc`.
void use_bias_and_documents(reference::Problem& p, const Captured<float>& bias,
                            const Captured<std::int32_t>& doc, std::int64_t seqlen) {
  const std::int64_t row = 2 * 60 - 1;
  p.score_mod_text = kBiasMod;
  p.score_mod = [&bias, row](double s, std::int64_t, std::int64_t h, std::int64_t i,
                             std::int64_t j) {
    return s + bias.host[static_cast<std::size_t>(h * row + i - j + 59)];
  };
  p.score_mod_slope = [](double, std::int64_t, std::int64_t, std::int64_t, std::int64_t) {
    return 1.0;
  };
  p.mask_mod_text = kDocumentMask;
  p.mask_mod = [&doc, seqlen](std::int64_t b, std::int64_t, std::int64_t i, std::int64_t j) {
    return doc.host[static_cast<std::size_t>(b * seqlen + i)] ==
           doc.host[static_cast<std::size_t>(b * seqlen + j)];
  };
}

}  // namespace

TEST_CASE("captures: a bias table and document ids in the forward, GQA and causal") {
  const Captured<float> bias = bias_table(4, 60);
  const Captured<std::int32_t> doc = document_ids(2, 60);
  ForwardCase c = make_case(4, 2, 60, 60, 64, true);
  c.problem.batch = 2;
  use_bias_and_documents(c.problem, bias, doc, 60);
  c.captures = {{"bias", bias.view}, {"doc", doc.view}};
  INFO(c.name());
  const ForwardVerdict verdict = run_forward_case(emulator(), c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());

  // A bias of the wrong values must fail: the kernel really reads the table.
  Captured<float> other = bias_table(4, 60);
  for (float& x : other.host) x += 1.0f;
  ForwardCase wrong = c;
  use_bias_and_documents(wrong.problem, other, doc, 60);
  CHECK_FALSE(run_forward_case(emulator(), wrong).ok);
}

TEST_CASE("captures: the backward reads them as constants, both dQ modes") {
  const Captured<float> bias = bias_table(2, 60);
  const Captured<std::int32_t> doc = document_ids(2, 60);
  BackwardCase c = backward_case(2, 1, 60, 64);
  c.problem.batch = 2;
  use_bias_and_documents(c.problem, bias, doc, 60);
  c.captures = {{"doc", doc.view}, {"bias", bias.view}};  // any order: names bind them
  for (bool deterministic : {false, true}) {
    c.deterministic = deterministic;
    INFO(c.name());
    const BackwardVerdict verdict = run_backward_case(emulator(), c);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
  }
}

TEST_CASE("captures: a block mask built from captured document ids changes no bit") {
  const Captured<std::int32_t> doc = document_ids(1, 200);
  Attention a{.batch = 1, .heads_q = 2, .heads_kv = 1, .seqlen_q = 200, .seqlen_k = 200};
  a.mask_mod = kDocumentMask;
  a.captures = {{"doc", doc.view}};
  const std::int64_t slabs = (a.seqlen_q + 15) / 16;
  DeviceBuffer mask = emulator().allocate(static_cast<std::size_t>(2 * slabs * 16));
  const TensorView mask_view = TensorView::contiguous(mask.data(), DType::i32, {1, 2, slabs, 4});
  emulator().build_block_mask(a, mask_view);
  std::vector<std::int32_t> entries(static_cast<std::size_t>(2 * slabs * 4));
  emulator().copy_to_host(entries.data(), mask.data(), entries.size() * 4);
  // Rows 0-15 are in document 0 (tokens 0-22): they see keys of the tiles [0, 32) only, the tile
  // [0, 16) whole.
  CHECK(std::vector<std::int32_t>(entries.begin(), entries.begin() + 4) ==
        std::vector<std::int32_t>{0, 32, 0, 16});

  std::vector<std::uint16_t> values(200 * 2 * 64);
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<std::uint16_t>(0x3c00 + (i * 37) % 512);  // small positive bf16
  }
  const std::size_t bytes = values.size() * 2;
  DeviceBuffer q = emulator().allocate(bytes), kv = emulator().allocate(bytes / 2);
  emulator().copy_to_device(q.data(), values.data(), bytes);
  emulator().copy_to_device(kv.data(), values.data(), bytes / 2);
  DeviceBuffer o = emulator().allocate(bytes);
  const auto run = [&](const Attention& call) {
    emulator().forward(call, TensorView::contiguous(q.data(), DType::bf16, {1, 200, 2, 64}),
                       TensorView::contiguous(kv.data(), DType::bf16, {1, 200, 1, 64}),
                       TensorView::contiguous(kv.data(), DType::bf16, {1, 200, 1, 64}),
                       TensorView::contiguous(o.data(), DType::bf16, {1, 200, 2, 64}),
                       TensorView{});
    std::vector<std::uint16_t> out(values.size());
    emulator().copy_to_host(out.data(), o.data(), bytes);
    return out;
  };
  const std::vector<std::uint16_t> plain = run(a);
  Attention skipping = a;
  skipping.block_mask = mask_view;
  CHECK(run(skipping) == plain);
}

TEST_CASE("captures: missing, misnamed and malformed ones are named, nothing launched") {
  const Captured<float> bias = bias_table(1, 60);
  const Captured<std::int32_t> doc = document_ids(1, 60);
  std::vector<std::uint16_t> zeros(60 * 64, 0);
  DeviceBuffer x = emulator().allocate(zeros.size() * 2),
               out = emulator().allocate(zeros.size() * 2);
  emulator().copy_to_device(x.data(), zeros.data(), zeros.size() * 2);
  const TensorView t = TensorView::contiguous(x.data(), DType::bf16, {1, 60, 1, 64});
  const TensorView o = TensorView::contiguous(out.data(), DType::bf16, {1, 60, 1, 64});
  Attention a{.seqlen_q = 60, .seqlen_k = 60};
  a.score_mod = kBiasMod;
  a.mask_mod = kDocumentMask;
  a.captures = {{"bias", bias.view}, {"doc", doc.view}};
  const auto rejects = [&](const Attention& bad, const char* field, const char* words) {
    emulator().reset_emulated_work();
    INFO(field << ": " << words);
    try {
      emulator().forward(bad, t, t, t, o, TensorView{});
      FAIL("accepted");
    } catch (const InvalidArgument& e) {
      CHECK(e.argument() == field);
      CHECK(std::string(e.what()).find(words) != std::string::npos);
    }
    CHECK(emulator().emulated_work().empty());
  };
  Attention missing = a;
  missing.captures.pop_back();  // no "doc"
  rejects(missing, "attention.mask_mod", "no capture is named 'doc'");
  Attention renamed = a;
  renamed.captures[0].name = "q_idx";
  rejects(renamed, "attention.captures[0].name", "own names");
  renamed.captures[0].name = "2bias";
  rejects(renamed, "attention.captures[0].name", "not an identifier");
  renamed.captures[0].name = "doc";
  rejects(renamed, "attention.captures[1].name", "also capture 0");
  Attention shapeless = a;
  shapeless.captures[1].tensor.rank = 5;
  rejects(shapeless, "attention.captures[1].tensor.rank", "1 to 4");
  Attention unset = a;
  unset.captures[0].tensor.data = nullptr;
  rejects(unset, "attention.captures[0].tensor", "null");
  Attention many = a;
  for (const char* name : {"c", "d", "e"}) many.captures.push_back({name, doc.view});
  rejects(many, "attention.captures", "at most 4");
  emulator().forward(a, t, t, t, o, TensorView{});  // the good one runs
}

}  // namespace flashjit::testing

namespace flashjit::testing {
namespace {

/// bf16 bits of `x` (round to nearest even) and their value.
std::uint16_t bf16_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return static_cast<std::uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}
double bf16_value(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

}  // namespace

TEST_CASE("captures: the emulator reports a read outside a captured tensor") {
  // On a GPU an index outside the capture reads whatever is there; the emulator checks every
  // read against the capture's bytes, as against the call's other tensors.
  const Captured<float> bias = bias_table(1, 60);
  std::vector<std::uint16_t> zeros(60 * 64, 0);
  DeviceBuffer x = emulator().allocate(zeros.size() * 2),
               out = emulator().allocate(zeros.size() * 2);
  emulator().copy_to_device(x.data(), zeros.data(), zeros.size() * 2);
  const TensorView t = TensorView::contiguous(x.data(), DType::bf16, {1, 60, 1, 64});
  Attention a{.seqlen_q = 60, .seqlen_k = 60};
  a.score_mod = "score + bias[h][q_idx - kv_idx + 100000]";  // far past the 119 entries
  a.captures = {{"bias", bias.view}};
  try {
    emulator().forward(a, t, t, t, TensorView::contiguous(out.data(), DType::bf16, {1, 60, 1, 64}),
                       TensorView{});
    FAIL("expected the emulator's finding");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kernel_fault);
    CHECK(std::string(e.what()).find("global_out_of_bounds") != std::string::npos);
  }
}

namespace {

/// A learnable bias table's gradient from `runtime`'s backward at head dim `dim` (the
/// kernels it chooses), against a float64 backward of the same inputs.
void check_learnable_bias(Runtime& runtime, std::int64_t dim) {
  // score + 0.5 · bias[h][q_idx - kv_idx + 39], causal, 2 heads over 1 key head: ∂L/∂bias[h][d]
  // is 0.5 · Σ dS over the pairs at offset d, against a float64 backward of the same inputs.
  constexpr std::int64_t kHeads = 2, kSeq = 40, kSpan = 2 * kSeq - 1;
  Captured<float> bias = bias_table(kHeads, kSeq, runtime);
  std::vector<float> zeros(bias.host.size(), 0.0f);
  DeviceBuffer grad = runtime.allocate(zeros.size() * 4);
  runtime.copy_to_device(grad.data(), zeros.data(), zeros.size() * 4);
  Attention a{.heads_q = kHeads,
              .heads_kv = 1,
              .seqlen_q = kSeq,
              .seqlen_k = kSeq,
              .head_dim = dim,
              .causal = true};
  a.score_mod = "score + 0.5f * bias[h][q_idx - kv_idx + 39]";
  a.captures = {
      {"bias", bias.view, TensorView::contiguous(grad.data(), DType::f32, {kHeads, kSpan})}};
  // Inputs: q [1, s, h, d], k and v [1, s, 1, d], dO like q; bf16 in [-1, 1).
  std::vector<std::uint16_t> q(kSeq * kHeads * dim), k(kSeq * dim), v(kSeq * dim), dout(q.size());
  unsigned seed = 12345;
  for (std::vector<std::uint16_t>* x : {&q, &k, &v, &dout}) {
    for (std::uint16_t& e : *x) {
      seed = seed * 1664525u + 1013904223u;
      e = bf16_bits(static_cast<float>(seed >> 8) / static_cast<float>(1 << 23) - 1.0f);
    }
  }
  const auto device = [&](const std::vector<std::uint16_t>& host) {
    DeviceBuffer buffer = runtime.allocate(host.size() * 2);
    runtime.copy_to_device(buffer.data(), host.data(), host.size() * 2);
    return buffer;
  };
  const DeviceBuffer dq_buf = runtime.allocate(q.size() * 2),
                     dk_buf = runtime.allocate(k.size() * 2),
                     dv_buf = runtime.allocate(v.size() * 2),
                     o_buf = runtime.allocate(q.size() * 2),
                     lse_buf = runtime.allocate(kHeads * kSeq * 4);
  const DeviceBuffer q_buf = device(q), k_buf = device(k), v_buf = device(v), do_buf = device(dout);
  const auto view = [&](const DeviceBuffer& b, std::int64_t heads) {
    return TensorView::contiguous(b.data(), DType::bf16, {1, kSeq, heads, dim});
  };
  const TensorView lse = TensorView::contiguous(lse_buf.data(), DType::f32, {1, kHeads, kSeq});
  runtime.forward(a, view(q_buf, kHeads), view(k_buf, 1), view(v_buf, 1), view(o_buf, kHeads), lse);
  runtime.backward(a, view(q_buf, kHeads), view(k_buf, 1), view(v_buf, 1), view(o_buf, kHeads), lse,
                   view(do_buf, kHeads), view(dq_buf, kHeads), view(dk_buf, 1), view(dv_buf, 1));
  std::vector<float> got(zeros.size());
  runtime.copy_to_host(got.data(), grad.data(), got.size() * 4);

  // The float64 backward of the same rounded inputs, to dS.
  std::vector<double> expected(zeros.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(dim));
  for (std::int64_t h = 0; h < kHeads; ++h) {
    for (std::int64_t i = 0; i < kSeq; ++i) {
      std::vector<double> p(static_cast<std::size_t>(i + 1)), dp(p.size());
      double max = -1e300, sum = 0, delta = 0;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0, dpj = 0;
        for (std::int64_t d = 0; d < dim; ++d) {
          dot += bf16_value(q[(i * kHeads + h) * dim + d]) * bf16_value(k[j * dim + d]);
          dpj += bf16_value(dout[(i * kHeads + h) * dim + d]) * bf16_value(v[j * dim + d]);
        }
        p[j] = dot * scale + 0.5 * bias.host[static_cast<std::size_t>(h * kSpan + i - j + 39)];
        dp[j] = dpj;
        max = std::max(max, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - max));
      for (std::size_t j = 0; j < p.size(); ++j) {
        p[j] /= sum;
        delta += p[j] * dp[j];  // D = dO · O = Σ P dP
      }
      for (std::int64_t j = 0; j <= i; ++j) {
        expected[static_cast<std::size_t>(h * kSpan + i - j + 39)] += 0.5 * p[j] * (dp[j] - delta);
      }
    }
  }
  double error = 0, norm = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    error += (got[e] - expected[e]) * (got[e] - expected[e]);
    norm += expected[e] * expected[e];
  }
  INFO("relative L2 error " << std::sqrt(error / norm));
  CHECK(std::sqrt(error / norm) < 2e-2);  // bf16 inputs and P, fp32 sums
  CHECK(got[0] == 0.0f);                  // offset -39: no causal pair reads it, nothing is added
}

}  // namespace

TEST_CASE("captures: a learnable bias table gets its gradient from the backward") {
  check_learnable_bias(emulator(), 32);
}

TEST_CASE("captures: a learnable bias table's gradient from sm_90a's TMA backward") {
  hopper_emulator().reset_emulated_work();
  check_learnable_bias(hopper_emulator(), 64);
  const std::vector<KernelWork> work = hopper_emulator().emulated_work();
  CHECK(std::any_of(work.begin(), work.end(), [](const KernelWork& k) {
    return k.kernel.starts_with("attention_backward.dkdv") &&
           k.kernel.find(".tma") != std::string::npos && k.kernel.find(".mod") != std::string::npos;
  }));
}

TEST_CASE("captures: a gradient needs a float capture read once, fp32, the tensor's layout") {
  const Captured<float> bias = bias_table(1, 60);
  const Captured<std::int32_t> doc = document_ids(1, 60);
  DeviceBuffer grad = emulator().allocate(bias.host.size() * 4);
  const TensorView good = TensorView::contiguous(grad.data(), DType::f32, {1, 119});
  Attention a{.seqlen_q = 60, .seqlen_k = 60};
  a.score_mod = kBiasMod;
  a.captures = {{"bias", bias.view, good}};
  kernels::validate_attention(a);  // the good one passes
  const auto rejects = [](const Attention& bad, const char* field, const char* words) {
    INFO(field << ": " << words);
    try {
      kernels::validate_attention(bad);
      FAIL("accepted");
    } catch (const InvalidArgument& e) {
      CHECK(e.argument() == field);
      CHECK(std::string(e.what()).find(words) != std::string::npos);
    }
  };
  Attention twice = a;
  twice.score_mod = "score + bias[h][q_idx - kv_idx + 59] * bias [0][0]";
  rejects(twice, "attention.captures[0].grad", "exactly once (it reads it 2 times)");
  Attention half = a;
  half.captures[0].grad.dtype = DType::bf16;
  rejects(half, "attention.captures[0].grad.dtype", "fp32");
  Attention other_shape = a;
  other_shape.captures[0].grad = TensorView::contiguous(grad.data(), DType::f32, {119, 1});
  rejects(other_shape, "attention.captures[0].grad.shape", "tensor's shape");
  Attention ids = a;
  ids.mask_mod = kDocumentMask;
  ids.captures.push_back(
      {"doc", doc.view, TensorView::contiguous(grad.data(), DType::f32, {1, 60})});
  rejects(ids, "attention.captures[1].grad", "int32");

  // A gradient sharing memory with a tensor the backward reads or writes is named, before
  // anything runs.
  std::vector<DeviceBuffer> buffers;
  std::vector<TensorView> views;  // q, k, v, o, dout, dq, dk, dv: bf16 [1, 60, 1, 64]
  for (int i = 0; i < 8; ++i) {
    buffers.push_back(emulator().allocate(60 * 64 * 2));
    views.push_back(TensorView::contiguous(buffers.back().data(), DType::bf16, {1, 60, 1, 64}));
  }
  DeviceBuffer lse = emulator().allocate(60 * 4);
  const TensorView stats = TensorView::contiguous(lse.data(), DType::f32, {1, 1, 60});
  Attention shared = a;
  shared.captures[0].grad = TensorView::contiguous(buffers[5].data(), DType::f32, {1, 119});
  shared.captures[0].grad.strides = bias.view.strides;
  emulator().reset_emulated_work();
  CHECK_THROWS_WITH_AS(emulator().backward(shared, views[0], views[1], views[2], views[3], stats,
                                           views[4], views[5], views[6], views[7]),
                       doctest::Contains("'attention.captures[0].grad'"), InvalidArgument);
  CHECK(emulator().emulated_work().empty());
}

}  // namespace flashjit::testing
