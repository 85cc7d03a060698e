// The fp8 forward (q, k and v e4m3 with descale factors, o bf16; attention/fp8/) on the CPU
// emulator as an sm_89 and an sm_90a: against the float64 attention over the dequantized inputs,
// within twice the error that rounding P to e4m3 alone makes (FlashAttention-3's fp8 test
// criterion), over head dims, masks, GQA, softcap, ragged tiles and every descale shape; and
// bad input named before anything runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention/attention_tuning.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"
#include "support/emulator_runtime.hpp"
#include "support/forward_case_builders.hpp"

namespace flashjit::testing {
namespace {

/// The emulator as an sm_89 (fp8 tensor cores, 99 KB of shared memory a block).
Runtime& ada_emulator() {
  static Runtime runtime(RuntimeOptions{.backend = Backend::emulator, .emulated_arch = "sm_89"});
  return runtime;
}

/// How the descale factors of a case are shaped.
enum class Descales { none, per_tensor, per_head, per_sequence };

struct Fp8Case {
  std::int64_t batch = 1, heads_q = 2, heads_kv = 1, seqlen_q = 70, seqlen_k = 90, head_dim = 64;
  bool causal = false;
  std::int64_t window_left = -1;
  float softcap = 0.0f;
  Descales descales = Descales::per_head;
  // Codes of padding after each of q's rows (sequence positions), NaN codes that must not be
  // read: a strided q (the library takes strides of whole 16-byte chunks).
  std::int64_t q_row_padding = 0;

  std::string name() const {
    return "b" + std::to_string(batch) + " h" + std::to_string(heads_q) + "/" +
           std::to_string(heads_kv) + " q" + std::to_string(seqlen_q) + " k" +
           std::to_string(seqlen_k) + " d" + std::to_string(head_dim) + (causal ? " causal" : "") +
           (window_left >= 0 ? " window" : "") + (softcap > 0 ? " softcap" : "") + " descales " +
           std::to_string(int(descales)) + " q row padding " + std::to_string(q_row_padding);
  }
};

/// A [batch, seqlen, heads, dim] tensor of e4m3 codes and the values they stand for (codes
/// times their (batch, kv head)'s factor).
struct Codes {
  std::vector<std::uint8_t> codes;
  std::vector<float> factors;  // [batch · heads_kv]
  std::int64_t seqlen, heads, dim;
  double value(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d,
               std::int64_t heads_per_factor) const {
    const std::size_t at = static_cast<std::size_t>(((b * seqlen + s) * heads + h) * dim + d);
    const std::int64_t heads_kv = heads / heads_per_factor;
    return double(float_from_e4m3_bits(codes[at])) *
           factors[static_cast<std::size_t>(b * heads_kv + h / heads_per_factor)];
  }
};

Codes random_codes(const Fp8Case& c, std::int64_t seqlen, std::int64_t heads, std::mt19937& rng,
                   float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  Codes t{{}, {}, seqlen, heads, c.head_dim};
  t.codes.resize(static_cast<std::size_t>(c.batch * seqlen * heads * c.head_dim));
  for (std::uint8_t& code : t.codes) code = e4m3_bits_from_float(normal(rng));
  std::uniform_real_distribution<float> factor(0.25f, 2.0f);
  t.factors.assign(static_cast<std::size_t>(c.batch * c.heads_kv), 1.0f);
  for (std::size_t i = 0; i < t.factors.size(); ++i) {
    switch (c.descales) {
      case Descales::none:
        break;
      case Descales::per_tensor:
        t.factors[i] = i == 0 ? factor(rng) : t.factors[0];
        break;
      case Descales::per_head:
        t.factors[i] = i < std::size_t(c.heads_kv) ? factor(rng) : t.factors[i % c.heads_kv];
        break;
      case Descales::per_sequence:
        t.factors[i] = factor(rng);
        break;
    }
  }
  return t;
}

/// The case's descale tensor of `t`'s factors in `runtime`'s memory (null view: none).
TensorView descale_view(Runtime& runtime, const Fp8Case& c, const Codes& t,
                        std::vector<DeviceBuffer>& keep) {
  if (c.descales == Descales::none) return {};
  const std::int64_t count = c.descales == Descales::per_tensor ? 1
                             : c.descales == Descales::per_head ? c.heads_kv
                                                                : c.batch * c.heads_kv;
  DeviceBuffer& buffer = keep.emplace_back(runtime.allocate(static_cast<std::size_t>(count) * 4));
  runtime.copy_to_device(buffer.data(), t.factors.data(), static_cast<std::size_t>(count) * 4);
  if (c.descales == Descales::per_sequence) {
    return TensorView::contiguous(buffer.data(), DType::f32, {c.batch, c.heads_kv});
  }
  return TensorView::contiguous(buffer.data(), DType::f32, {count});
}

/// One row's float64 output over the dequantized inputs: exact, and with each P / max P
/// rounded to e4m3 first (what the kernel's rounding alone costs), and its LSE.
struct RowReference {
  std::vector<double> exact, rounded;
  double lse;
};

RowReference reference_row(const Fp8Case& c, const Codes& q, const Codes& k, const Codes& v,
                           std::int64_t b, std::int64_t h, std::int64_t i) {
  const std::int64_t group = c.heads_q / c.heads_kv, kv = h / group, d = c.head_dim;
  const double scale = 1.0 / std::sqrt(double(d));
  const std::int64_t diagonal = i + c.seqlen_k - c.seqlen_q;
  std::vector<double> scores;
  std::vector<std::int64_t> keys;
  for (std::int64_t j = 0; j < c.seqlen_k; ++j) {
    if (c.causal && j > diagonal) continue;
    if (c.window_left >= 0 && j < diagonal - c.window_left) continue;
    double dot = 0;
    for (std::int64_t e = 0; e < d; ++e)
      dot += q.value(b, i, h, e, group) * k.value(b, j, kv, e, 1);
    double s = dot * scale;
    if (c.softcap > 0) s = c.softcap * std::tanh(s / c.softcap);
    scores.push_back(s);
    keys.push_back(j);
  }
  RowReference row{std::vector<double>(d, 0.0), std::vector<double>(d, 0.0),
                   -std::numeric_limits<double>::infinity()};
  if (keys.empty()) return row;
  const double top = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (double s : scores) sum += std::exp(s - top);
  row.lse = top + std::log(sum);
  for (std::size_t n = 0; n < keys.size(); ++n) {
    const double p = std::exp(scores[n] - top);
    const double p_rounded = float_from_e4m3_bits(e4m3_bits_from_float(float(p)));
    for (std::int64_t e = 0; e < d; ++e) {
      const double value = v.value(b, keys[n], kv, e, 1);
      row.exact[e] += p / sum * value;
      row.rounded[e] += p_rounded / sum * value;
    }
  }
  return row;
}

/// Runs `c` on `runtime` and checks O and LSE against the float64 references.
void check_fp8_case(Runtime& runtime, const Fp8Case& c) {
  INFO(c.name());
  std::mt19937 rng(static_cast<unsigned>(c.seqlen_q * 131 + c.head_dim * 7 + c.heads_q));
  const Codes q = random_codes(c, c.seqlen_q, c.heads_q, rng, 2.0f);
  const Codes k = random_codes(c, c.seqlen_k, c.heads_kv, rng, 2.0f);
  const Codes v = random_codes(c, c.seqlen_k, c.heads_kv, rng, 1.0f);
  std::vector<DeviceBuffer> keep;
  const auto upload = [&](const Codes& t) {
    DeviceBuffer& buffer = keep.emplace_back(runtime.allocate(t.codes.size()));
    runtime.copy_to_device(buffer.data(), t.codes.data(), t.codes.size());
    return TensorView::contiguous(buffer.data(), DType::e4m3, {c.batch, t.seqlen, t.heads, t.dim});
  };
  const TensorView k_view = upload(k), v_view = upload(v);
  TensorView q_view = upload(q);
  if (c.q_row_padding > 0) {  // q's rows spread out, the padding NaN codes
    const std::int64_t row = c.heads_q * c.head_dim, stride = row + c.q_row_padding;
    std::vector<std::uint8_t> spread(static_cast<std::size_t>(c.batch * c.seqlen_q * stride), 0xFF);
    for (std::int64_t r = 0; r < c.batch * c.seqlen_q; ++r) {
      std::copy_n(q.codes.begin() + r * row, row, spread.begin() + r * stride);
    }
    DeviceBuffer& buffer = keep.emplace_back(runtime.allocate(spread.size()));
    runtime.copy_to_device(buffer.data(), spread.data(), spread.size());
    q_view = TensorView::strided(buffer.data(), DType::e4m3,
                                 {c.batch, c.seqlen_q, c.heads_q, c.head_dim},
                                 {c.seqlen_q * stride, stride, c.head_dim, 1});
  }
  const std::size_t o_count =
      static_cast<std::size_t>(c.batch * c.seqlen_q * c.heads_q * c.head_dim);
  DeviceBuffer o = runtime.allocate(o_count * 2);
  DeviceBuffer lse =
      runtime.allocate(static_cast<std::size_t>(c.batch * c.heads_q * c.seqlen_q) * 4);
  Attention a;
  a.batch = c.batch;
  a.heads_q = c.heads_q;
  a.heads_kv = c.heads_kv;
  a.seqlen_q = c.seqlen_q;
  a.seqlen_k = c.seqlen_k;
  a.head_dim = c.head_dim;
  a.causal = c.causal;
  a.window_left = c.window_left;
  a.softcap = c.softcap;
  a.q_descale = descale_view(runtime, c, q, keep);
  a.k_descale = descale_view(runtime, c, k, keep);
  a.v_descale = descale_view(runtime, c, v, keep);
  runtime.forward(
      a, q_view, k_view, v_view,
      TensorView::contiguous(o.data(), DType::bf16, {c.batch, c.seqlen_q, c.heads_q, c.head_dim}),
      TensorView::contiguous(lse.data(), DType::f32, {c.batch, c.heads_q, c.seqlen_q}));
  std::vector<std::uint16_t> o_bits(o_count);
  std::vector<float> lse_host(static_cast<std::size_t>(c.batch * c.heads_q * c.seqlen_q));
  runtime.copy_to_host(o_bits.data(), o.data(), o_count * 2);
  runtime.copy_to_host(lse_host.data(), lse.data(), lse_host.size() * 4);

  double kernel_error = 0, rounding_error = 0, largest = 0, lse_error = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t h = 0; h < c.heads_q; ++h) {
      for (std::int64_t i = 0; i < c.seqlen_q; ++i) {
        const RowReference row = reference_row(c, q, k, v, b, h, i);
        for (std::int64_t e = 0; e < c.head_dim; ++e) {
          const auto at =
              static_cast<std::size_t>(((b * c.seqlen_q + i) * c.heads_q + h) * c.head_dim + e);
          const double got = float_from_bf16_bits(o_bits[at]);
          kernel_error = std::max(kernel_error, std::fabs(got - row.exact[e]));
          rounding_error = std::max(rounding_error, std::fabs(row.rounded[e] - row.exact[e]));
          largest = std::max(largest, std::fabs(row.exact[e]));
        }
        const double got_lse =
            lse_host[static_cast<std::size_t>((b * c.heads_q + h) * c.seqlen_q + i)];
        if (std::isinf(row.lse)) {
          CHECK(std::isinf(got_lse));
        } else {
          lse_error = std::max(lse_error, std::fabs(got_lse - row.lse));
        }
      }
    }
  }
  INFO("max |O - O_exact| " << kernel_error << ", rounding P alone " << rounding_error
                            << ", max |O_exact| " << largest << ", max LSE error " << lse_error);
  // Twice P's rounding, plus O's bf16 rounding (2^-8 relative) and the per-block maxima the
  // kernel rounds against (a block's P relative to its running max, not the row's).
  CHECK(kernel_error <= 2 * rounding_error + largest * 0x1p-7);
  CHECK(rounding_error > 0);  // the criterion is not vacuous
  CHECK(lse_error <= 1e-3);
}

}  // namespace

TEST_CASE("fp8 forward on sm_89: head dims 64 and 128, masks, GQA, softcap, each descale shape") {
  check_fp8_case(ada_emulator(), {});
  check_fp8_case(ada_emulator(), {.batch = 2,
                                  .heads_q = 4,
                                  .heads_kv = 2,
                                  .seqlen_q = 130,
                                  .seqlen_k = 130,
                                  .head_dim = 128,
                                  .causal = true,
                                  .descales = Descales::per_sequence});
  check_fp8_case(
      ada_emulator(),
      {.seqlen_q = 33, .seqlen_k = 200, .window_left = 40, .descales = Descales::per_tensor});
  check_fp8_case(ada_emulator(), {.heads_q = 3,
                                  .heads_kv = 3,
                                  .seqlen_q = 17,
                                  .seqlen_k = 65,
                                  .head_dim = 48,
                                  .softcap = 20.0f,
                                  .descales = Descales::none});
}

TEST_CASE("fp8 forward on sm_89: head dim 256 (Bc 32, O in parts)") {
  check_fp8_case(ada_emulator(), {.seqlen_q = 40, .seqlen_k = 75, .head_dim = 256, .causal = true});
}

TEST_CASE("fp8 forward on sm_90a: TMA and wgmma from head dim 64, mma.sync below and on request") {
  using kernels::ForwardConfig;
  const auto default_on_hopper = [](int head_dim) {
    return kernels::default_forward_config(DType::e4m3, head_dim, MaskKind::none, false, "sm_90a");
  };
  CHECK(default_on_hopper(64).fp8_tma());
  CHECK(default_on_hopper(256).fp8_tma());
  CHECK_FALSE(default_on_hopper(48).fp8_tma());
  CHECK_FALSE(kernels::fallback_forward_config(DType::e4m3, 128, MaskKind::none, false, "sm_90a")
                  .fp8_tma());
  CHECK_FALSE(
      kernels::default_forward_config(DType::e4m3, 128, MaskKind::none, false, "sm_89").fp8_tma());
  // The TMA form: one warpgroup without a row (40 queries, Br 128), a padded head dim (192 in
  // 256), ragged key blocks, GQA, a window, softcap, every descale shape, and a query block
  // that sees no key at all (causal, 300 queries over 20 keys: LSE −inf, O 0).
  check_fp8_case(hopper_emulator(), {.seqlen_q = 40, .seqlen_k = 75, .head_dim = 192});
  check_fp8_case(hopper_emulator(), {.batch = 2,
                                     .heads_q = 4,
                                     .heads_kv = 2,
                                     .seqlen_q = 130,
                                     .seqlen_k = 200,
                                     .head_dim = 64,
                                     .descales = Descales::per_sequence});
  check_fp8_case(hopper_emulator(), {.seqlen_q = 70,
                                     .seqlen_k = 150,
                                     .head_dim = 256,
                                     .window_left = 40,
                                     .descales = Descales::per_tensor});
  // q's rows 16 NaN codes apart: the TMA maps' strides are the view's.
  check_fp8_case(hopper_emulator(), {.seqlen_q = 50, .seqlen_k = 70, .q_row_padding = 16});
  check_fp8_case(hopper_emulator(), {.heads_q = 2,
                                     .heads_kv = 2,
                                     .seqlen_q = 300,
                                     .seqlen_k = 20,
                                     .head_dim = 128,
                                     .causal = true,
                                     .softcap = 20.0f,
                                     .descales = Descales::none});
  // Br 64 (one consumer warpgroup), and the mma.sync form asked for by config.
  ForwardCase c = make_case(2, 1, 90, 140, 128, /*causal=*/true);
  c.dtype = DType::e4m3;
  const ForwardConfig mma_sync =
      kernels::fallback_forward_config(DType::e4m3, 128, MaskKind::window, false, "sm_90a");
  int runs = 0;
  for (const ForwardConfig& config :
       kernels::forward_configs(DType::e4m3, 128, MaskKind::window, false)) {
    if (!(config.fp8_tma() ? config.block_m == 64 : config == mma_sync)) continue;
    INFO(autotune::TunedConfigTraits<ForwardConfig>::name(config));
    const ForwardVerdict verdict = run_forward_case(hopper_emulator(), c, config);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
    ++runs;
  }
  CHECK(runs == 2);
  // A narrower V (MLA's 192/128 shape at 128/64): Vᵀ's rows past it are TMA's zeros, O's
  // columns past it are not stored.
  ForwardCase narrow = make_case(2, 2, 70, 90, 128, /*causal=*/true);
  narrow.dtype = DType::e4m3;
  narrow.problem.head_dim_v = 64;
  const ForwardVerdict verdict = run_forward_case(hopper_emulator(), narrow);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

/// One query over 512 keys whose probabilities are 1 (key 0) and 2^-10 (the rest, e^-6.93: their
/// scores are lower by 10 ln 2, through k_descale): O = Σ p v / Σ p with key 0's v 0 and the
/// others' 1 is 511 · 2^-10 / (1 + 511 · 2^-10) = 0.333. Rounded to e4m3 as they are, the small
/// probabilities fall halfway to e4m3's smallest step (2^-9) and round to 0, making O 0; shifted
/// by 2^8 first they are exact.
void check_small_probabilities(Runtime& runtime, std::int64_t head_dim) {
  INFO("head dim " << head_dim);
  const std::int64_t keys = 512;
  const std::uint8_t one = e4m3_bits_from_float(1.0f);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(head_dim), one);
  std::vector<std::uint8_t> k(static_cast<std::size_t>(keys * head_dim), 0), v = k;
  std::fill(k.begin(), k.begin() + head_dim, one);  // key 0: score head_dim · scale · k_descale
  std::fill(v.begin() + head_dim, v.end(), one);    // values 1 but key 0's
  // 10 ln 2 = head_dim · scale · k_descale, scale = 1/sqrt(head_dim)
  const float k_descale = float(10.0 * std::log(2.0) / std::sqrt(double(head_dim)));
  std::vector<DeviceBuffer> keep;
  const auto upload = [&](const void* data, std::size_t bytes) {
    DeviceBuffer& buffer = keep.emplace_back(runtime.allocate(bytes));
    runtime.copy_to_device(buffer.data(), data, bytes);
    return buffer.data();
  };
  Attention a;
  a.heads_q = a.heads_kv = 1;
  a.seqlen_q = 1;
  a.seqlen_k = keys;
  a.head_dim = head_dim;
  a.k_descale = TensorView::contiguous(upload(&k_descale, 4), DType::f32, {1});
  const auto view = [&](const std::vector<std::uint8_t>& codes, std::int64_t rows) {
    return TensorView::contiguous(upload(codes.data(), codes.size()), DType::e4m3,
                                  {1, rows, 1, head_dim});
  };
  DeviceBuffer o = runtime.allocate(static_cast<std::size_t>(head_dim) * 2);
  runtime.forward(a, view(q, 1), view(k, keys), view(v, keys),
                  TensorView::contiguous(o.data(), DType::bf16, {1, 1, 1, head_dim}), {});
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(head_dim));
  runtime.copy_to_host(bits.data(), o.data(), bits.size() * 2);
  const double small = std::ldexp(1.0, -10), expected = 511 * small / (1 + 511 * small);
  for (std::uint16_t b : bits) CHECK(std::fabs(float_from_bf16_bits(b) - expected) < 0.005);
}

TEST_CASE("fp8 forward: probabilities far below their row's maximum keep their weight") {
  check_small_probabilities(ada_emulator(), 64);      // mma.sync
  check_small_probabilities(hopper_emulator(), 128);  // TMA and wgmma
}

TEST_CASE("fp8 forward: bad input is named before anything runs") {
  Runtime& runtime = ada_emulator();
  Attention a;
  a.heads_q = 2;
  a.heads_kv = 1;
  a.seqlen_q = a.seqlen_k = 16;
  a.head_dim = 64;
  DeviceBuffer bytes = runtime.allocate(64 * 1024);
  int next = 0;  // each view a 16 KB quarter of its own, in turn
  const auto view = [&](DType dtype, std::int64_t heads, std::int64_t dim) {
    void* at = static_cast<char*>(bytes.data()) + (next++ % 4) * 16 * 1024;
    return TensorView::contiguous(at, dtype, {1, 16, heads, dim});
  };
  const auto rejects = [&](const Attention& call, DType o_dtype, DType k_dtype,
                           const std::string& argument) {
    CHECK_THROWS_WITH_AS(
        runtime.forward(call, view(DType::e4m3, 2, call.head_dim), view(k_dtype, 1, call.head_dim),
                        view(DType::e4m3, 1, call.head_dim), view(o_dtype, 2, call.head_dim),
                        TensorView{}),
        doctest::Contains(argument.c_str()), InvalidArgument);
  };
  rejects(a, DType::f16, DType::e4m3, "o.dtype");
  rejects(a, DType::bf16, DType::bf16, "k.dtype");
  Attention odd = a;
  odd.head_dim = 40;
  rejects(odd, DType::bf16, DType::e4m3, "attention.head_dim");
  Attention modified = a;
  modified.score_mod = "score * 2.0f";
  rejects(modified, DType::bf16, DType::e4m3, "attention.score_mod");
  Attention dropped = a;
  dropped.dropout_p = 0.1f;
  rejects(dropped, DType::bf16, DType::e4m3, "attention.dropout_p");
  Attention bad_descale = a;
  DeviceBuffer factors = runtime.allocate(64);
  bad_descale.k_descale = TensorView::contiguous(factors.data(), DType::f32, {3});
  rejects(bad_descale, DType::bf16, DType::e4m3, "attention.k_descale.shape");
  // Descale factors on a 16-bit call, the backward, an sm_80.
  Attention sixteen = a;
  sixteen.q_descale = TensorView::contiguous(factors.data(), DType::f32, {1});
  CHECK_THROWS_WITH_AS(
      runtime.forward(sixteen, view(DType::bf16, 2, 64), view(DType::bf16, 1, 64),
                      view(DType::bf16, 1, 64), view(DType::bf16, 2, 64), TensorView{}),
      doctest::Contains("attention.q_descale"), InvalidArgument);
  CHECK_THROWS_WITH_AS(
      emulator().forward(a, view(DType::e4m3, 2, 64), view(DType::e4m3, 1, 64),
                         view(DType::e4m3, 1, 64), view(DType::bf16, 2, 64), TensorView{}),
      doctest::Contains("sm_89"), InvalidArgument);
}

}  // namespace flashjit::testing
