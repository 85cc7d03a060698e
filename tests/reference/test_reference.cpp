// Tests of the float64 attention reference and of the shared checker: the reference is only
// worth trusting if its backward matches finite differences of its forward, split + combine
// equals unsplit, and LSE is the logsumexp of the row.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/check/attention_reference.hpp"
#include "reference/checker.hpp"

using namespace flashjit::reference;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Inputs {
  Tensor4 q, k, v;
};

Inputs random_inputs(const Problem& problem, Layout layout, uint64_t seed) {
  return {random_tensor(problem.q_shape(), layout, seed),
          random_tensor(problem.kv_shape(), layout, seed + 1),
          random_tensor(problem.kv_shape(), layout, seed + 2)};
}

ForwardResult run_forward(const Problem& problem, const Inputs& in, KeyRange keys = {},
                          Layout out_layout = Layout::bshd) {
  return forward(problem, in.q.view(), in.k.view(), in.v.view(), keys, out_layout);
}

// A problem with a name for SUBCASE, and the layout its tensors are stored in.
struct Case {
  std::string name;
  Problem problem;
  Layout layout = Layout::bshd;
};

// Tiny shapes that cover every mask feature; finite differences cost two forwards per element.
std::vector<Case> gradient_cases() {
  return {
      {"gqa 4:2",
       {.batch = 2, .heads_q = 4, .heads_kv = 2, .seqlen_q = 3, .seqlen_k = 4, .head_dim = 3}},
      {"causal, seqlen_q < seqlen_k, bhsd",
       {.heads_q = 2, .seqlen_q = 3, .seqlen_k = 5, .head_dim = 4, .causal = true},
       Layout::bhsd},
      {"causal, seqlen_q > seqlen_k",
       {.heads_q = 2, .heads_kv = 2, .seqlen_q = 5, .seqlen_k = 3, .head_dim = 3, .causal = true}},
      {"sliding window (2, 1), bhsd",
       {.seqlen_q = 6, .seqlen_k = 6, .head_dim = 3, .window_left = 2, .window_right = 1},
       Layout::bhsd},
      {"softcap",
       {.heads_q = 2,
        .heads_kv = 2,
        .seqlen_q = 3,
        .seqlen_k = 4,
        .head_dim = 3,
        .softmax_scale = 1.7,
        .softcap = 0.5}},
      {"gqa + causal + window + softcap, bhsd",
       {.heads_q = 4,
        .heads_kv = 2,
        .seqlen_q = 4,
        .seqlen_k = 5,
        .head_dim = 2,
        .causal = true,
        .window_left = 1,
        .softcap = 0.8},
       Layout::bhsd},
  };
}

// loss = sum(O ∘ G), so dloss/dO = G.
double loss(const Problem& problem, const Inputs& in, const Tensor4& g) {
  const ForwardResult result = run_forward(problem, in, {}, g.layout);
  double total = 0.0;
  for (size_t n = 0; n < g.values.size(); ++n) total += result.out.values[n] * g.values[n];
  return total;
}

// Central differences of the loss with respect to every element of in.*wrt.
Tensor4 numeric_gradient(const Problem& problem, Inputs& in, Tensor4 Inputs::*wrt,
                         const Tensor4& g) {
  constexpr double h = 1e-5;  // truncation ~h^2 and rounding ~eps/h both near 1e-10
  Tensor4& x = in.*wrt;
  Tensor4 grad = zeros(x.shape, x.layout);
  for (size_t n = 0; n < x.values.size(); ++n) {
    const double saved = x.values[n];
    x.values[n] = saved + h;
    const double up = loss(problem, in, g);
    x.values[n] = saved - h;
    const double down = loss(problem, in, g);
    x.values[n] = saved;
    grad.values[n] = (up - down) / (2 * h);
  }
  return grad;
}

void check_lse(const std::vector<double>& actual, const std::vector<double>& expected,
               double tolerance) {
  const CheckResult r = check_close(actual, expected, tolerance, "lse");
  CHECK_MESSAGE(r.ok, r);
}

void check_tensor(const Tensor4& actual, const Tensor4& expected, double tolerance,
                  const char* label) {
  REQUIRE(actual.shape == expected.shape);
  REQUIRE(actual.layout == expected.layout);
  const CheckResult r = check_close(actual.values, expected.values, tolerance, label);
  CHECK_MESSAGE(r.ok, r);
}

// Query head `head` of a [B, L, H, D] tensor, as a one-head tensor.
Tensor4 head_slice(const Tensor4& t, int64_t head) {
  Tensor4 slice = zeros({t.shape[0], t.shape[1], 1, t.shape[3]}, t.layout);
  for (int64_t b = 0; b < t.shape[0]; ++b)
    for (int64_t l = 0; l < t.shape[1]; ++l)
      for (int64_t d = 0; d < t.shape[3]; ++d) slice(b, l, 0, d) = t(b, l, head, d);
  return slice;
}

}  // namespace

TEST_CASE("mask: one predicate, bottom-right aligned, causal is a right window of 0") {
  const Problem causal{.seqlen_q = 2, .seqlen_k = 4, .causal = true};
  CHECK(causal.visible(0, 2));  // diagonal of row 0 is key 0 + (4 - 2)
  CHECK_FALSE(causal.visible(0, 3));
  CHECK(causal.visible(1, 3));
  CHECK_FALSE(causal.visible(1, 4));  // past seqlen_k
  const Problem window{.seqlen_q = 5, .seqlen_k = 5, .window_left = 1, .window_right = 2};
  CHECK_FALSE(window.visible(3, 1));
  CHECK(window.visible(3, 2));
  CHECK(window.visible(3, 4));
  CHECK_FALSE(window.visible(2, 5));
  const Problem causal_window{.seqlen_q = 5, .seqlen_k = 5, .causal = true, .window_right = 2};
  CHECK_FALSE(causal_window.visible(3, 4));  // causal wins over a wider right window
  const Problem long_queries{.seqlen_q = 4, .seqlen_k = 2, .causal = true};
  CHECK_FALSE(long_queries.visible(1, 0));  // row 1's diagonal is key -1: no key at all
  CHECK(long_queries.visible(2, 0));
}

TEST_CASE("mask: a key is seen when some query sees it") {
  for (const int64_t lq : {1, 3, 8}) {
    for (const int64_t lk : {1, 5, 12}) {
      for (const bool causal : {false, true}) {
        for (const int64_t left : {-1, 0, 2}) {
          for (const int64_t right : {-1, 0, 3}) {
            const Problem p{.seqlen_q = lq,
                            .seqlen_k = lk,
                            .causal = causal,
                            .window_left = left,
                            .window_right = right};
            for (int64_t j = -1; j <= lk; ++j) {
              bool seen = false;
              for (int64_t i = 0; i < lq; ++i) seen = seen || p.visible(i, j);
              INFO("lq " << lq << " lk " << lk << " causal " << causal << " window " << left << ","
                         << right << " key " << j);
              CHECK(p.key_seen(j) == seen);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("backward matches central finite differences of forward") {
  for (const Case& c : gradient_cases()) {
    SUBCASE(c.name.c_str()) {
      Inputs in = random_inputs(c.problem, c.layout, 11);
      const Tensor4 g = random_tensor(c.problem.q_shape(), c.layout, 99);
      const Gradients grads =
          backward(c.problem, in.q.view(), in.k.view(), in.v.view(), g.view(), c.layout);
      constexpr double tolerance = 1e-6;
      check_tensor(grads.dq, numeric_gradient(c.problem, in, &Inputs::q, g), tolerance, "dq");
      check_tensor(grads.dk, numeric_gradient(c.problem, in, &Inputs::k, g), tolerance, "dk");
      check_tensor(grads.dv, numeric_gradient(c.problem, in, &Inputs::v, g), tolerance, "dv");
    }
  }
}

TEST_CASE("split keys + combine equals unsplit") {
  const std::vector<Case> cases = {
      {"no mask, gqa", {.batch = 2, .heads_q = 2, .seqlen_q = 4, .seqlen_k = 6, .head_dim = 3}},
      // Split at 3: rows 0..2 see keys only in the first half, so the second half is empty.
      {"causal",
       {.heads_q = 2, .heads_kv = 2, .seqlen_q = 6, .seqlen_k = 6, .head_dim = 3, .causal = true}},
      // Rows 0 and 1 see no key at all: both halves are empty (the -inf/-inf guard).
      {"causal, seqlen_q > seqlen_k",
       {.seqlen_q = 6, .seqlen_k = 4, .head_dim = 2, .causal = true}},
      {"sliding window (1, 0), softcap",
       {.seqlen_q = 7,
        .seqlen_k = 7,
        .head_dim = 2,
        .window_left = 1,
        .window_right = 0,
        .softcap = 2.0},
       Layout::bhsd},
  };
  for (const Case& c : cases) {
    SUBCASE(c.name.c_str()) {
      const Inputs in = random_inputs(c.problem, c.layout, 5);
      const ForwardResult whole = run_forward(c.problem, in);
      // Splits 0 and seqlen_k leave one half with no keys at all.
      for (int64_t split = 0; split <= c.problem.seqlen_k; ++split) {
        CAPTURE(split);
        const ForwardResult merged = combine(run_forward(c.problem, in, {0, split}),
                                             run_forward(c.problem, in, {split, -1}));
        check_tensor(merged.out, whole.out, 1e-12, "o");
        check_lse(merged.lse, whole.lse, 1e-12);
      }
    }
  }
}

TEST_CASE("merge_states of N key splits equals unsplit, of one partial itself") {
  const Problem p{.heads_q = 2, .seqlen_q = 5, .seqlen_k = 9, .head_dim = 3, .causal = true};
  const Inputs in = random_inputs(p, Layout::bshd, 8);
  const ForwardResult whole = run_forward(p, in);
  // Four parts, one of them empty; causal rows 0..2 see no key of the last part.
  const std::vector<ForwardResult> parts = {run_forward(p, in, {0, 2}), run_forward(p, in, {2, 2}),
                                            run_forward(p, in, {2, 7}),
                                            run_forward(p, in, {7, -1})};
  const ForwardResult merged = merge_states(parts);
  check_tensor(merged.out, whole.out, 1e-12, "o");
  check_lse(merged.lse, whole.lse, 1e-12);
  const ForwardResult alone = merge_states(std::span(parts).first(1));
  check_tensor(alone.out, parts[0].out, 0.0, "o");
  CHECK_THROWS_AS(merge_states({}), std::invalid_argument);
}

TEST_CASE("LSE is the logsumexp of the row's scores, and O = exp(S - LSE) V") {
  const std::vector<Case> cases = {
      {"plain", {.heads_q = 2, .seqlen_q = 3, .seqlen_k = 5, .head_dim = 4}},
      {"causal, seqlen_q > seqlen_k",
       {.seqlen_q = 5, .seqlen_k = 3, .head_dim = 3, .causal = true}},
      {"softcap, gqa",
       {.batch = 2,
        .heads_q = 4,
        .heads_kv = 2,
        .seqlen_q = 3,
        .seqlen_k = 3,
        .head_dim = 2,
        .softcap = 0.3}},
  };
  for (const Case& c : cases) {
    SUBCASE(c.name.c_str()) {
      const Problem& p = c.problem;
      const Inputs in = random_inputs(p, c.layout, 21);
      const ForwardResult result = run_forward(p, in);
      std::vector<double> lse;
      Tensor4 out = zeros(p.q_shape(), Layout::bshd);
      for (int64_t b = 0; b < p.batch; ++b)
        for (int64_t h = 0; h < p.heads_q; ++h)
          for (int64_t i = 0; i < p.seqlen_q; ++i) {
            std::vector<double> exp_scores(p.seqlen_k, 0.0);  // no max subtracted
            double sum = 0.0;
            for (int64_t j = 0; j < p.seqlen_k; ++j) {
              if (!p.visible(i, j)) continue;
              double s = 0.0;
              for (int64_t d = 0; d < p.head_dim; ++d)
                s += in.q(b, i, h, d) * in.k(b, j, p.kv_head(h), d);
              s *= p.scale();
              if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
              exp_scores[j] = std::exp(s);
              sum += exp_scores[j];
            }
            lse.push_back(std::log(sum));  // log(0) = -inf for an empty row
            for (int64_t j = 0; j < p.seqlen_k && sum > 0; ++j)
              for (int64_t d = 0; d < p.head_dim; ++d)
                out(b, i, h, d) += exp_scores[j] / sum * in.v(b, j, p.kv_head(h), d);
          }
      check_lse(result.lse, lse, 1e-13);
      check_tensor(result.out, out, 1e-13, "o");
    }
  }
}

TEST_CASE("fully masked rows give O = 0 and LSE = -inf") {
  const Problem p{
      .heads_q = 2, .heads_kv = 2, .seqlen_q = 5, .seqlen_k = 3, .head_dim = 3, .causal = true};
  const ForwardResult result = run_forward(p, random_inputs(p, Layout::bshd, 3));
  for (int64_t h = 0; h < p.heads_q; ++h)
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      CAPTURE(h);
      CAPTURE(i);
      const bool masked = i < p.seqlen_q - p.seqlen_k;  // row i sees keys j <= i - 2
      CHECK((result.lse_at(0, h, i) == -kInf) == masked);
      if (masked)
        for (int64_t d = 0; d < p.head_dim; ++d) CHECK(result.out(0, i, h, d) == 0.0);
    }
}

TEST_CASE("the same logical data in either layout gives identical results") {
  const Problem p{.batch = 2,
                  .heads_q = 4,
                  .heads_kv = 2,
                  .seqlen_q = 4,
                  .seqlen_k = 6,
                  .head_dim = 3,
                  .causal = true,
                  .window_left = 3,
                  .softcap = 1.5};
  const Inputs bshd = random_inputs(p, Layout::bshd, 8);
  const Inputs bhsd = random_inputs(p, Layout::bhsd, 8);  // same seed: same logical values
  const Tensor4 dout = random_tensor(p.q_shape(), Layout::bshd, 9);

  SUBCASE("forward") {
    const ForwardResult a = run_forward(p, bshd);
    const ForwardResult b = run_forward(p, bhsd);
    CHECK(a.out.values == b.out.values);
    CHECK(a.lse == b.lse);
    const ForwardResult b_bhsd = run_forward(p, bhsd, {}, Layout::bhsd);
    CHECK(to_layout(b_bhsd.out.view(), Layout::bshd).values == a.out.values);
  }
  SUBCASE("backward") {
    const Gradients a = backward(p, bshd.q.view(), bshd.k.view(), bshd.v.view(), dout.view());
    const Tensor4 dout_bhsd = to_layout(dout.view(), Layout::bhsd);
    const Gradients b = backward(p, bhsd.q.view(), bhsd.k.view(), bhsd.v.view(), dout_bhsd.view());
    CHECK(a.dq.values == b.dq.values);
    CHECK(a.dk.values == b.dk.values);
    CHECK(a.dv.values == b.dv.values);
  }
  SUBCASE("padded strides") {
    // Q stored with two unused elements after each head_dim row: a view, not a dense tensor.
    const Shape4 s = p.q_shape();
    const int64_t row = s[3] + 2;
    std::vector<double> padded(static_cast<size_t>(s[0] * s[1] * s[2] * row), kInf);
    const View4 q{padded.data(), s, {s[1] * s[2] * row, s[2] * row, row, 1}};
    for (int64_t b = 0; b < s[0]; ++b)
      for (int64_t l = 0; l < s[1]; ++l)
        for (int64_t h = 0; h < s[2]; ++h)
          for (int64_t d = 0; d < s[3]; ++d) q(b, l, h, d) = bshd.q(b, l, h, d);
    const ForwardResult a = run_forward(p, bshd);
    const ForwardResult b = forward(p, q, bshd.k.view(), bshd.v.view());
    CHECK(a.out.values == b.out.values);
  }
}

TEST_CASE("MQA equals each query head run against the single kv head") {
  const Problem mqa{.batch = 2,
                    .heads_q = 3,
                    .heads_kv = 1,
                    .seqlen_q = 4,
                    .seqlen_k = 5,
                    .head_dim = 3,
                    .causal = true};
  const Inputs in = random_inputs(mqa, Layout::bshd, 31);
  const Tensor4 dout = random_tensor(mqa.q_shape(), Layout::bshd, 32);
  const ForwardResult all = run_forward(mqa, in);
  const Gradients grads = backward(mqa, in.q.view(), in.k.view(), in.v.view(), dout.view());

  Problem single = mqa;
  single.heads_q = 1;
  Tensor4 dk_sum = zeros(mqa.kv_shape(), Layout::bshd), dv_sum = dk_sum;
  for (int64_t h = 0; h < mqa.heads_q; ++h) {
    CAPTURE(h);
    const Inputs one{head_slice(in.q, h), in.k, in.v};
    const ForwardResult head = run_forward(single, one);
    CHECK(head.out.values == head_slice(all.out, h).values);
    for (int64_t b = 0; b < mqa.batch; ++b)
      for (int64_t i = 0; i < mqa.seqlen_q; ++i) CHECK(head.lse_at(b, 0, i) == all.lse_at(b, h, i));
    const Gradients g =
        backward(single, one.q.view(), in.k.view(), in.v.view(), head_slice(dout, h).view());
    CHECK(g.dq.values == head_slice(grads.dq, h).values);
    for (size_t n = 0; n < dk_sum.values.size(); ++n) {
      dk_sum.values[n] += g.dk.values[n];
      dv_sum.values[n] += g.dv.values[n];
    }
  }
  check_tensor(grads.dk, dk_sum, 1e-14, "dk = sum over query heads");
  check_tensor(grads.dv, dv_sum, 1e-14, "dv = sum over query heads");
}

TEST_CASE("log_add_exp is stable and keeps -inf + -inf at -inf") {
  CHECK(log_add_exp(-kInf, -kInf) == -kInf);
  CHECK(log_add_exp(-kInf, 0.5) == 0.5);
  CHECK(log_add_exp(1000.0, 1000.0) == doctest::Approx(1000.0 + std::log(2.0)));
}

TEST_CASE("softmax_rows: rows sum to one, an all -inf row gives zeros") {
  const int64_t stride = 4;  // 3 columns, one unused element per row
  const std::vector<double> x = {1.0,   2.0,  3.0,   99.0,  -kInf, -kInf,
                                 -kInf, 99.0, 700.0, -kInf, 699.0, 99.0};
  std::vector<double> y(x.size(), 7.0);
  softmax_rows(x.data(), 3, 3, stride, y.data());
  const double e = std::exp(1.0), sum = 1.0 + e + e * e;
  CHECK(y[0] == doctest::Approx(1.0 / sum));
  CHECK(y[2] == doctest::Approx(e * e / sum));
  CHECK(y[4] == 0.0);
  CHECK(y[6] == 0.0);
  CHECK(y[8] == doctest::Approx(e / (1.0 + e)));  // no overflow at 700
  CHECK(y[9] == 0.0);
  CHECK(y[3] == 7.0);  // the padding is not written
}

TEST_CASE("bad input is rejected with a named error") {
  const Problem p{.heads_q = 2, .seqlen_q = 2, .seqlen_k = 3, .head_dim = 2};
  const Inputs in = random_inputs(p, Layout::bshd, 1);
  Problem not_multiple = p;
  not_multiple.heads_q = 3;
  not_multiple.heads_kv = 2;
  CHECK_THROWS_WITH_AS(not_multiple.validate(), doctest::Contains("multiple of heads_kv"),
                       std::invalid_argument);
  Problem bad_window = p;
  bad_window.window_left = -2;
  CHECK_THROWS_AS(bad_window.validate(), std::invalid_argument);
  CHECK_THROWS_WITH_AS(forward(p, in.k.view(), in.k.view(), in.v.view()),
                       doctest::Contains("q has shape"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(run_forward(p, in, {2, 1}), doctest::Contains("key range"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(run_forward(p, in, {0, 4}), doctest::Contains("key range"),
                       std::invalid_argument);
  const Problem other{.seqlen_q = 3, .seqlen_k = 3, .head_dim = 2};
  const ForwardResult other_result = run_forward(other, random_inputs(other, Layout::bshd, 2));
  CHECK_THROWS_WITH_AS(combine(run_forward(p, in), other_result),
                       doctest::Contains("shapes differ"), std::invalid_argument);
}

TEST_CASE_TEMPLATE("checker", T, float, double) {
  const std::vector<double> expected = {0.5, -1.25, 2.0, -kInf, 4.0, kInf};
  std::vector<T> actual(expected.begin(), expected.end());
  const auto check = [&](double tolerance) {
    return check_close(std::span<const T>(actual), expected, tolerance, "x");
  };

  SUBCASE("identical arrays pass, matched infinities included") {
    const CheckResult r = check(0.0);
    CHECK_MESSAGE(r.ok, r);
    CHECK(r.rel_l2 == 0.0);
    CHECK(r.count == 6);
  }
  SUBCASE("a NaN fails whatever the tolerance") {
    actual[1] = std::numeric_limits<T>::quiet_NaN();
    const CheckResult r = check(1e9);
    CHECK_FALSE(r.ok);
    CHECK(r.nonfinite_mismatches == 1);
    CHECK(r.describe().find("[1] actual = nan") != std::string::npos);
  }
  SUBCASE("a wrong infinity fails") {
    actual[3] = std::numeric_limits<T>::infinity();   // +inf where -inf is expected
    actual[5] = T(1);                                 // finite where +inf is expected
    actual[0] = -std::numeric_limits<T>::infinity();  // infinity where finite is expected
    const CheckResult r = check(1e9);
    CHECK_FALSE(r.ok);
    CHECK(r.nonfinite_mismatches == 3);
    CHECK(r.describe().find("expected infinity not matched") != std::string::npos);
    CHECK(r.describe().find("infinity in actual") != std::string::npos);
  }
  SUBCASE("fails above the tolerance, passes below") {
    for (T& a : actual) a *= T(1.001);
    CHECK(check(1e-2).ok);
    const CheckResult r = check(1e-4);
    CHECK_FALSE(r.ok);
    CHECK(r.rel_l2 == doctest::Approx(1e-3).epsilon(1e-3));
    CHECK(r.max_abs == doctest::Approx(4e-3).epsilon(1e-3));
  }
  SUBCASE("lists the first mismatches in a short report") {
    const std::vector<double> ramp(40, 1.0);
    std::vector<T> wrong(40, T(2));
    const CheckResult r = check_close(std::span<const T>(wrong), ramp, 1e-3, "ramp");
    CHECK_FALSE(r.ok);
    CHECK(r.mismatches == 40);
    CHECK(r.describe().find("ramp: FAIL") == 0);
    CHECK(r.describe().find("[0] actual = 2, expected = 1") != std::string::npos);
    CHECK(r.describe().find("[6]") == std::string::npos);
    CHECK(r.describe().find("... and 34 more") != std::string::npos);
    int lines = 1;
    for (char ch : r.describe()) lines += ch == '\n';
    CHECK(lines <= 8);
  }
  SUBCASE("an all-zero expected array is judged by absolute L2") {
    const std::vector<double> zero(3, 0.0);
    const std::vector<T> small = {T(0), T(0.0001), T(0)};
    const CheckResult r = check_close(std::span<const T>(small), zero, 1e-3);
    CHECK(r.l2_is_absolute);
    CHECK(r.ok);
  }
  SUBCASE("different sizes fail") {
    actual.pop_back();
    CHECK_FALSE(check(1.0).ok);
  }
}
