// The backward through score and mask modifiers (Attention::score_mod, mask_mod) on the CPU
// emulator: the kernels take ∂score_mod/∂score from dual numbers; the float64 reference takes
// it from a derivative written by hand in each test (SCORE_MOD_WITH_SLOPE's second expression), so
// the two are independent. Dense and variable-length batches, GQA, causal, softcap, both dQ modes,
// an emulated sm_90a; gradients against finite differences of a loss; the dual numbers themselves
// against central differences.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "attention/attention_backward.hpp"
#include "attention/check/backward_case.hpp"
#include "attention/check/inference_case.hpp"
#include "attention/parts/dual_number.cuh"
#include "flashjit/error.hpp"
#include "support/backward_case_builders.hpp"
#include "support/emulator_runtime.hpp"
#include "support/modifier_expressions.hpp"

// The expressions are written as users write them, ints mixed into float arithmetic.
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wfloat-conversion"

namespace flashjit::testing {
namespace {

using ScoreFunction =
    std::function<double(double, std::int64_t, std::int64_t, std::int64_t, std::int64_t)>;
using MaskFunction = std::function<bool(std::int64_t, std::int64_t, std::int64_t, std::int64_t)>;

BackwardCase with_score_mod(BackwardCase c, std::string text, ScoreFunction f,
                            ScoreFunction slope) {
  c.problem.score_mod_text = std::move(text);
  c.problem.score_mod = std::move(f);
  c.problem.score_mod_slope = std::move(slope);
  return c;
}

BackwardCase with_mask_mod(BackwardCase c, std::string text, MaskFunction f) {
  c.problem.mask_mod_text = std::move(text);
  c.problem.mask_mod = std::move(f);
  return c;
}

void check_case(Runtime& runtime, const BackwardCase& c) {
  INFO(c.name());
  const BackwardVerdict verdict = run_backward_case(runtime, c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

}  // namespace

TEST_CASE("modifiers backward: a score modifier whose slope depends on the head") {
  // ALiBi-like, with a slope per head in the chain and the batch entry in the bias; causal,
  // GQA 4:2, ragged tiles, two batch entries.
  BackwardCase c = with_score_mod(
      make_case(4, 2, 77, 93, 64, true),
      SCORE_MOD_WITH_SLOPE(score * (1.0f + 0.25f * h) - 0.05f * (q_idx - kv_idx) + 0.5f * b,
                           1.0 + 0.25 * h));
  c.problem.batch = 2;
  check_case(emulator(), c);
}

TEST_CASE("modifiers backward: a nonlinear score modifier with a mask modifier, both dQ modes") {
  // A soft cap written as a modifier, and every fifth (query + key + head) hidden; fp16.
  BackwardCase c = with_mask_mod(
      with_score_mod(make_case(2, 1, 70, 97, 64),
                     SCORE_MOD_WITH_SLOPE(4.0f * tanhf(score / 4.0f) + 0.02f * (kv_idx - q_idx),
                                          1.0 - std::tanh(score / 4.0) * std::tanh(score / 4.0))),
      MASK_MOD((q_idx + kv_idx + h) % 5 != 0));
  c.problem.softmax_scale = 1.0;  // scores of several units, where tanh bends
  c.dtype = DType::f16;
  check_case(emulator(), c);
  check_case(emulator(), deterministic(c));
}

TEST_CASE("modifiers backward: after the built-in softcap, at head dim 128, bhsd") {
  // The modifier's slope (0.2·score) and the softcap's (1 − tanh²) both in the chain.
  BackwardCase c =
      with_score_mod(make_case(2, 2, 40, 40, 128),
                     SCORE_MOD_WITH_SLOPE(0.1f * score * score + score, 0.2 * score + 1.0));
  c.problem.softcap = 3.0;
  c.problem.softmax_scale = 0.5;
  c.layout = reference::Layout::bhsd;
  check_case(emulator(), c);
}

TEST_CASE("modifiers backward: rows that see no key, and a mask modifier alone") {
  // Rows from 12 on see no key (LSE = −inf): no gradient flows from them.
  check_case(emulator(), with_mask_mod(make_case(1, 1, 33, 33, 64), MASK_MOD(kv_idx > q_idx + 20)));
  check_case(emulator(), deterministic(with_mask_mod(make_case(2, 1, 50, 50, 64, true),
                                                     MASK_MOD(q_idx / 16 == kv_idx / 16))));
}

TEST_CASE("modifiers backward on an emulated sm_90a: the TMA backward runs them, both dQ modes") {
  // Head dim 64: two warpgroups of 64 keys each; 128: two sharing 64 keys (the modifiers'
  // config), GQA and causal, a nonlinear modifier of the head and both indices with a mask.
  const BackwardCase shared_keys =
      with_mask_mod(with_score_mod(make_case(4, 1, 65, 65, 128, true),
                                   SCORE_MOD_WITH_SLOPE(score - 0.05f * h * (q_idx - kv_idx), 1.0)),
                    MASK_MOD(kv_idx % 7 != 3));
  const BackwardCase own_keys = with_mask_mod(
      with_score_mod(make_case(2, 2, 90, 140, 64),
                     SCORE_MOD_WITH_SLOPE(4.0f * tanhf(score / 4.0f) + 0.01f * (h + q_idx - kv_idx),
                                          1.0 - std::tanh(score / 4.0) * std::tanh(score / 4.0))),
      MASK_MOD(q_idx / 32 != kv_idx / 48));
  for (const BackwardCase& base : {shared_keys, own_keys}) {
    for (bool deterministic : {false, true}) {
      BackwardCase c = base;
      c.deterministic = deterministic;
      INFO(c.name());
      hopper_emulator().reset_emulated_work();
      check_case(hopper_emulator(), c);
      bool saw_modified_dkdv = false;
      for (const KernelWork& kernel : hopper_emulator().emulated_work()) {
        if (kernel.kernel.find("attention_backward.dkdv") == 0) {
          saw_modified_dkdv = kernel.kernel.find(".tma") != std::string::npos &&
                              kernel.kernel.find(".mod") != std::string::npos;
        }
      }
      CHECK(saw_modified_dkdv);
    }
  }
}

TEST_CASE("modifiers backward: gradients against finite differences of a loss") {
  // Independent of any derivative written by hand: the loss itself, moved. The inputs being
  // fp16, the step is large (1), so the modifier bends gently (a slope of 1 + 0.2·score): the
  // central difference's truncation error grows with its higher derivatives.
  BackwardCase c = with_score_mod(
      make_case(2, 1, 6, 9, 16, true),
      SCORE_MOD_WITH_SLOPE(score + 0.1f * score * score - 0.1f * h * kv_idx, 1.0 + 0.2 * score));
  c.dtype = DType::f16;
  for (bool deterministic : {false, true}) {
    c.deterministic = deterministic;
    INFO(c.name());
    const FiniteDifferenceVerdict verdict = check_finite_differences(emulator(), c, 4);
    CHECK_MESSAGE(verdict.ok, verdict.report);
  }
}

TEST_CASE("modifiers backward of variable lengths: b is the sequence, indices within it") {
  // Every sequence with queries and keys, so each b's bias and slope are exercised.
  InferenceCase c{.seqlens_q = {17, 30, 9}, .seqlens_k = {25, 40, 33}};
  c.packed_q = true;
  c.keys = KeyStorage::packed;
  c.causal = true;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.score_mod_text = "score * (1.0f + 0.5f * b) - 0.03f * (q_idx - kv_idx)";
  c.score_mod = [](double s, std::int64_t b, std::int64_t, std::int64_t q, std::int64_t k) {
    return s * (1.0 + 0.5 * static_cast<double>(b)) - 0.03 * static_cast<double>(q - k);
  };
  c.score_mod_slope = [](double, std::int64_t b, std::int64_t, std::int64_t, std::int64_t) {
    return 1.0 + 0.5 * static_cast<double>(b);
  };
  c.mask_mod_text = "(kv_idx + h) % 4 != 1";
  c.mask_mod = [](std::int64_t, std::int64_t h, std::int64_t, std::int64_t k) {
    return (k + h) % 4 != 1;
  };
  for (bool deterministic : {false, true}) {
    c.deterministic = deterministic;
    INFO(c.name());
    const InferenceVerdict verdict = run_inference_backward_case(emulator(), c);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
  }
  // sm_90a's TMA backward, each CTA rebased to its sequence: b must still be the sequence.
  c.deterministic = false;
  hopper_emulator().reset_emulated_work();
  const InferenceVerdict verdict = run_inference_backward_case(hopper_emulator(), c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  const std::vector<KernelWork> work = hopper_emulator().emulated_work();
  CHECK(std::any_of(work.begin(), work.end(), [](const KernelWork& k) {
    return k.kernel.find(".tma") != std::string::npos &&
           k.kernel.find(".varlen") != std::string::npos &&
           k.kernel.find(".mod") != std::string::npos && k.kernel.find("dkdv") != std::string::npos;
  }));
}

TEST_CASE("modifiers backward: kernel names, the TMA backward's included") {
  const kernels::ScoreModifiers alibi{"score - 0.5f * (q_idx - kv_idx)", ""};
  const kernels::BackwardConfig config =
      kernels::fallback_backward_config(DType::bf16, 64, MaskKind::none, false, false, "sm_80");
  const kernels::BackwardSpecs plain = kernels::backward_specs(config, "sm_80");
  const kernels::BackwardSpecs modified = kernels::backward_specs(config, "sm_80", alibi);
  CHECK(plain.dkdv.prelude.empty());
  CHECK(modified.dkdv.readable_name != plain.dkdv.readable_name);
  CHECK(modified.dkdv.name_expression.find(alibi.type_name()) != std::string::npos);
  CHECK(modified.dkdv.main_source().find("score - 0.5f * (q_idx - kv_idx)") != std::string::npos);
  CHECK(modified.delta.readable_name == plain.delta.readable_name);  // D does not see scores
  kernels::BackwardConfig deterministic_config =
      kernels::fallback_backward_config(DType::bf16, 64, MaskKind::none, false, true, "sm_80");
  const kernels::BackwardSpecs dq = kernels::backward_specs(deterministic_config, "sm_80", alibi);
  CHECK(dq.dq.name_expression.find(alibi.type_name()) != std::string::npos);
  // The TMA backward's: the modifiers' struct its traits' last argument.
  const kernels::BackwardConfig tma =
      kernels::modifiers_backward_config(DType::bf16, 64, MaskKind::none, false, false, "sm_90a");
  REQUIRE(tma.tma);
  const kernels::BackwardSpecs hopper = kernels::backward_specs(tma, "sm_90a", alibi);
  CHECK(hopper.dkdv.name_expression.find(", " + alibi.type_name() + ">>") != std::string::npos);
  CHECK(hopper.dkdv.readable_name.find(".tma") != std::string::npos);
  CHECK(hopper.dkdv.readable_name.find(".mod") != std::string::npos);
  CHECK(kernels::backward_specs(tma, "sm_90a").dkdv.prelude.empty());
  // At a padded head dim of 128 the modifiers' TMA backward shares its keys (as softcap's).
  CHECK(kernels::modifiers_backward_config(DType::bf16, 128, MaskKind::none, false, false, "sm_90a")
            .shared_keys());
  CHECK_FALSE(
      kernels::default_backward_config(DType::bf16, 128, MaskKind::none, false, false, "sm_90a")
          .shared_keys());
}

TEST_CASE("dual numbers: every function's derivative against a central difference") {
  using D = Dual<double>;
  const auto check = [](const char* what, auto f, double x) {
    INFO(what << " at " << x);
    const double h = 1e-6;
    const double numeric = (f(D(x + h)).value - f(D(x - h)).value) / (2 * h);
    const D y = f(D(x, 1.0));
    CHECK(y.value == doctest::Approx(f(D(x)).value));
    CHECK(y.slope == doctest::Approx(numeric).epsilon(1e-6));
  };
  for (double x : {0.3, 1.7, 2.5}) {
    check(
        "expf", [](D s) { return expf(s); }, x);
    check(
        "exp2f", [](D s) { return exp2f(s); }, x);
    check(
        "logf", [](D s) { return logf(s); }, x);
    check(
        "log2f", [](D s) { return log2f(s); }, x);
    check(
        "log1pf", [](D s) { return log1pf(s); }, x);
    check(
        "sqrtf", [](D s) { return sqrtf(s); }, x);
    check(
        "tanhf", [](D s) { return tanhf(s); }, x);
    check(
        "sinf", [](D s) { return sinf(s); }, x);
    check(
        "cosf", [](D s) { return cosf(s); }, x);
    check(
        "powf(s, 2.5)", [](D s) { return powf(s, 2.5); }, x);
    check(
        "powf(s, s)", [](D s) { return powf(s, s); }, x);
    check(
        "pow(2, s)", [](D s) { return pow(D(2.0), s); }, x);
    check(
        "fabsf(-s)", [](D s) { return fabsf(-s); }, x);
    check(
        "fmaxf(s, 1)", [](D s) { return fmaxf(s, 1.0); }, x);
    check(
        "min(s * s, 2)", [](D s) { return min(s * s, 2.0); }, x);
    check(
        "quotients", [](D s) { return (3.0 - s) / (s + 1.0) + 2.0 / s - s / 4.0; }, x);
    check(
        "mixed ints", [](D s) { return 3 * s * s - s * 2 + 1; }, x);
    check(
        "a ternary", [](D s) { return s > 1 ? s * s : 0.5f; }, x);
  }
}

}  // namespace flashjit::testing
