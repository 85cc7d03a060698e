#include "attention/check/backward_case.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/check/attention_case.hpp"
#include "cases/case_inputs.hpp"
#include "cases/unit_roundoff.hpp"

namespace flashjit::testing {
namespace {

using reference::ConstView4;
using reference::Layout;
using reference::Problem;
using namespace case_inputs;  // rounding, upload, sampled rows, scores, written-element checks

/// The same problem as a forward case: its name and library descriptor.
ForwardCase as_forward(const BackwardCase& c) {
  ForwardCase f;
  f.problem = c.problem;
  f.dtype = c.dtype;
  f.layout = c.layout;
  f.seed = c.seed;
  f.sample_rows = c.sample_rows;
  f.captures = c.captures;
  return f;
}

struct Inputs {
  RoundedTensor q, k, v, dout;
};
Inputs make_inputs(const BackwardCase& c) {
  const Problem& p = c.problem;
  return {rounded_random(p.q_shape(), c.layout, c.seed, c.dtype),
          rounded_random(p.kv_shape(), c.layout, c.seed + 1, c.dtype),
          rounded_random(p.v_shape(), c.layout, c.seed + 2, c.dtype),
          rounded_random(p.o_shape(), c.layout, c.seed + 3, c.dtype)};
}

/// The inputs' values, read-only.
struct InputViews {
  ConstView4 q, k, v, dout;
};
InputViews views(const Inputs& in) {
  return {in.q.values.view(), in.k.values.view(), in.v.values.view(), in.dout.values.view()};
}

/// x · y over `n` contiguous elements (a head_dim row of a dense tensor).
double dot(const double* x, const double* y, std::int64_t n) {
  double sum = 0;
  for (std::int64_t d = 0; d < n; ++d) sum += x[d] * y[d];
  return sum;
}

/// Where the textbook backward rounds its intermediate values: nowhere (the float64
/// reference) or to the input dtype (the plain low-precision backward). With `fp32_sums`, dP
/// and D stay unrounded, as the kernels keep them (fp32): where the two round to the same
/// value (one visible key under dropout: dP·Z and dO · r(O) differ by O's rounding alone), the
/// rounded model's dS is exactly 0 and the kernels' is not.
struct Precision {
  std::optional<DType> dtype;
  bool fp32_sums = false;
  double operator()(double x) const { return dtype ? round_to(*dtype, x) : x; }
  double sum(double x) const { return fp32_sums ? x : (*this)(x); }
};

/// One query row's softmax and D = rowsum(dO ∘ O) at a precision r:
/// P_j = r(e^(r(S_j) − max) / sum), O = r((P ∘ Z) V) (Z: dropout's factors), D = r(dO · O).
struct RowStats {
  double max = kNegInf;  ///< of the row's rounded scores; -inf: the row sees no key
  double sum = 0;
  double delta = 0;

  double probability(double score, const Precision& r) const {
    return score == kNegInf ? 0.0 : r(std::exp(r(score) - max) / sum);
  }
};

/// The stats of row (b, h, i) from its float64 scores `s` (row_scores); `probs` is scratch,
/// left holding the row's probabilities.
RowStats row_stats(const Problem& p, const InputViews& in, std::int64_t b, std::int64_t h,
                   std::int64_t i, const std::vector<double>& s, const Precision& r,
                   std::vector<double>& probs) {
  RowStats stats;
  for (double sj : s) stats.max = std::max(stats.max, r(sj));
  if (stats.max == kNegInf) return stats;  // no visible key: P = 0, O = 0, D = 0
  for (double sj : s) stats.sum += std::exp(r(sj) - stats.max);
  probs.resize(s.size());
  for (std::size_t j = 0; j < s.size(); ++j) probs[j] = stats.probability(s[j], r);
  std::vector<double> o(static_cast<std::size_t>(p.value_dim()), 0.0);
  const std::int64_t hk = p.kv_head(h);
  for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
    const double pj = probs[static_cast<std::size_t>(j)] * (p.dropout ? p.dropout(b, h, i, j) : 1);
    if (pj == 0) continue;  // masked: causal rows at real sizes see half the keys
    const double* v_row = &in.v(b, j, hk, 0);
    for (std::size_t d = 0; d < o.size(); ++d) o[d] += pj * v_row[d];  // unit stride
  }
  for (std::int64_t d = 0; d < p.value_dim(); ++d) {
    stats.delta += in.dout(b, i, h, d) * r(o[static_cast<std::size_t>(d)]);
  }
  stats.delta = r.sum(stats.delta);
  return stats;
}

/// Where a score sits: batch, query head, query row, key.
struct Pair {
  std::int64_t b, h, i, j;
};

/// dS of one visible (row, key) pair, chained through the score modifier and the softcap: the
/// gradient with respect to the scaled dot product, before the scale. `s` is the exact score,
/// `dp` the exact dO · V.
double score_gradient(const Problem& p, const InputViews& in, const Pair& at, double probability,
                      double s, double dp, double delta, const Precision& r) {
  double ds = r(probability * (r.sum(dp) - delta));  // dS = P ∘ (dP − D)
  // The slopes are taken at the score before the modifier (the modifier's input).
  const double capped = p.score_mod ? capped_score(p, in.q, in.k, at.b, at.h, at.i, at.j) : s;
  if (p.score_mod) ds = r(ds * p.modified_slope(capped, at.b, at.h, at.i, at.j));
  if (p.softcap > 0) {
    const double t = capped / p.softcap;  // s = c·tanh(x / c): ds/dx = 1 − tanh²
    ds = r(ds * (1 - t * t));
  }
  return ds;
}

/// Rounds the sums of a gradient as the textbook's last step: dQ = r(scale · Σ dS K) and
/// dK = r(scale · Σ dSᵀ Q) take `scale`, dV = r(Σ Pᵀ dO) takes 1.
void finish(std::vector<double>& sums, double scale, const Precision& r) {
  for (double& x : sums) x = r(scale * x);
}

/// The plain backward of every row (see plain_backward_errors), in the case's layout.
reference::Gradients plain_backward(const BackwardCase& c, const InputViews& in,
                                    bool fp32_sums = false) {
  const Problem& p = c.problem;
  const Precision r{c.dtype, fp32_sums};
  reference::Gradients g{reference::zeros(p.q_shape(), c.layout),
                         reference::zeros(p.kv_shape(), c.layout),
                         reference::zeros(p.v_shape(), c.layout)};
  const reference::View4 dq = g.dq.view(), dk = g.dk.view(), dv = g.dv.view();
  std::vector<double> s, probs;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      const std::int64_t hk = p.kv_head(h);
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        row_scores(p, in.q, in.k, b, h, i, s);
        const RowStats stats = row_stats(p, in, b, h, i, s, r, probs);
        for (std::int64_t j = 0; j < p.seqlen_k && stats.max != kNegInf; ++j) {
          const double sj = s[static_cast<std::size_t>(j)];
          if (sj == kNegInf) continue;
          const double pj = probs[static_cast<std::size_t>(j)];
          const double z = p.dropout ? p.dropout(b, h, i, j) : 1.0;  // dropout's factor
          const double dp = z * dot(&in.dout(b, i, h, 0), &in.v(b, j, hk, 0), p.value_dim());
          const double ds = score_gradient(p, in, {b, h, i, j}, pj, sj, dp, stats.delta, r);
          for (std::int64_t d = 0; d < p.head_dim; ++d) {
            dq(b, i, h, d) += ds * in.k(b, j, hk, d);
            dk(b, j, hk, d) += ds * in.q(b, i, h, d);
          }
          for (std::int64_t d = 0; d < p.value_dim(); ++d) {
            dv(b, j, hk, d) += pj * z * in.dout(b, i, h, d);
          }
        }
      }
    }
  }
  finish(g.dq.values, p.scale(), r);
  finish(g.dk.values, p.scale(), r);
  finish(g.dv.values, 1.0, r);
  return g;
}

/// The compared elements of each gradient: all of it in the case's layout, or the sampled
/// rows' in order.
struct GradientValues {
  std::vector<double> dq, dk, dv;
};

/// The reference side of a case's verdicts, computed once for any number of runs.
struct Expected {
  std::vector<SampledRow> query_rows, key_rows;  // empty unless sampled
  GradientValues exact, plain;
  GradientValues plain_fp32_sums;  ///< with dropout only (Precision::fp32_sums); else empty
};

GradientValues values_of(reference::Gradients&& g) {
  return {std::move(g.dq.values), std::move(g.dk.values), std::move(g.dv.values)};
}

Expected full_expected(const BackwardCase& c, const InputViews& in) {
  Expected e;
  e.exact = values_of(reference::backward(c.problem, in.q, in.k, in.v, in.dout, c.layout));
  e.plain = values_of(plain_backward(c, in));
  if (c.problem.dropout) e.plain_fp32_sums = values_of(plain_backward(c, in, true));
  return e;
}

/// The plain backward's relative L2 error on one gradient: the larger of the two models' where
/// there are two (see Precision).
double plain_error(const std::vector<double>& exact, const std::vector<double>& plain,
                   const std::vector<double>& plain_fp32_sums) {
  const double rounded = reference::check_close(plain, exact, 1.0).rel_l2;
  if (plain_fp32_sums.empty()) return rounded;
  return std::max(rounded, reference::check_close(plain_fp32_sums, exact, 1.0).rel_l2);
}

/// Both precisions of one sampled row's gradient(s), appended.
struct RowPair {
  GradientValues& exact;
  GradientValues& plain;
};

/// dQ of sampled query row `row` at both precisions, appended to `out`.
void add_query_row(const BackwardCase& c, const InputViews& in, const SampledRow& row,
                   RowPair out) {
  const Problem& p = c.problem;
  const std::int64_t b = row.batch, h = row.head, i = row.row, hk = p.kv_head(h);
  std::vector<double> s, probs;
  row_scores(p, in.q, in.k, b, h, i, s);
  for (const Precision& r : {Precision{}, Precision{c.dtype}}) {
    std::vector<double> dq(static_cast<std::size_t>(p.head_dim), 0.0);
    const RowStats stats = row_stats(p, in, b, h, i, s, r, probs);
    for (std::int64_t j = 0; j < p.seqlen_k && stats.max != kNegInf; ++j) {
      const double sj = s[static_cast<std::size_t>(j)];
      if (sj == kNegInf) continue;
      const double dp = dot(&in.dout(b, i, h, 0), &in.v(b, j, hk, 0), p.value_dim());
      const double ds = score_gradient(p, in, {b, h, i, j}, probs[static_cast<std::size_t>(j)], sj,
                                       dp, stats.delta, r);
      for (std::int64_t d = 0; d < p.head_dim; ++d) {
        dq[static_cast<std::size_t>(d)] += ds * in.k(b, j, hk, d);
      }
    }
    finish(dq, p.scale(), r);
    std::vector<double>& to = r.dtype ? out.plain.dq : out.exact.dq;
    to.insert(to.end(), dq.begin(), dq.end());
  }
}

/// Runs f(i) for i in [0, count) on every hardware thread: the rows of a sampled case's
/// key-side statistics (every query row of a head at 16k tokens) are independent.
template <class F>
void parallel_for(std::int64_t count, F f) {
  std::atomic<std::int64_t> next{0};
  auto work = [&] {
    for (std::int64_t i = next++; i < count; i = next++) f(i);
  };
  std::vector<std::jthread> threads;
  const unsigned helpers = std::max(1u, std::thread::hardware_concurrency()) - 1;
  for (unsigned t = 0; t < helpers; ++t) threads.emplace_back(work);
  work();
}

/// Both precisions' stats of every query row of the heads sharing key/value head `hk` of batch
/// `b`, at [(h − first head) · seqlen_q + i]: what a key row's dK and dV sum over.
struct GroupStats {
  std::vector<RowStats> exact, plain;
};
GroupStats group_stats(const BackwardCase& c, const InputViews& in, std::int64_t b,
                       std::int64_t hk) {
  const Problem& p = c.problem;
  const std::int64_t group = p.heads_q / p.heads_kv;
  GroupStats stats{std::vector<RowStats>(static_cast<std::size_t>(group * p.seqlen_q)),
                   std::vector<RowStats>(static_cast<std::size_t>(group * p.seqlen_q))};
  parallel_for(group * p.seqlen_q, [&](std::int64_t n) {
    const std::int64_t h = hk * group + n / p.seqlen_q, i = n % p.seqlen_q;
    std::vector<double> s, probs;
    row_scores(p, in.q, in.k, b, h, i, s);
    stats.exact[static_cast<std::size_t>(n)] = row_stats(p, in, b, h, i, s, {}, probs);
    stats.plain[static_cast<std::size_t>(n)] = row_stats(p, in, b, h, i, s, {c.dtype}, probs);
  });
  return stats;
}

/// dK and dV of sampled key row `row` at both precisions, appended to `out`: sums over every
/// query row of every head of the group that sees the key.
void add_key_row(const BackwardCase& c, const InputViews& in, const GroupStats& stats,
                 const SampledRow& row, RowPair out) {
  const Problem& p = c.problem;
  const std::int64_t b = row.batch, hk = row.head, j = row.row;
  const std::int64_t group = p.heads_q / p.heads_kv;
  const auto dims = static_cast<std::size_t>(p.head_dim);
  const auto value_dims = static_cast<std::size_t>(p.value_dim());
  std::vector<double> dk[2] = {std::vector<double>(dims), std::vector<double>(dims)};
  std::vector<double> dv[2] = {std::vector<double>(value_dims), std::vector<double>(value_dims)};
  const Precision precisions[2] = {{}, {c.dtype}};
  for (std::int64_t n = 0; n < group * p.seqlen_q; ++n) {
    const std::int64_t h = hk * group + n / p.seqlen_q, i = n % p.seqlen_q;
    if (!p.sees(b, h, i, j)) continue;
    const double s = score(p, in.q, in.k, b, h, i, j);
    const double dp = dot(&in.dout(b, i, h, 0), &in.v(b, j, hk, 0), p.value_dim());
    for (int x = 0; x < 2; ++x) {
      const RowStats& st = (x == 0 ? stats.exact : stats.plain)[static_cast<std::size_t>(n)];
      if (st.max == kNegInf) continue;
      const double pj = st.probability(s, precisions[x]);
      const double ds = score_gradient(p, in, {b, h, i, j}, pj, s, dp, st.delta, precisions[x]);
      for (std::int64_t d = 0; d < p.head_dim; ++d) {
        dk[x][static_cast<std::size_t>(d)] += ds * in.q(b, i, h, d);
      }
      for (std::int64_t d = 0; d < p.value_dim(); ++d) {
        dv[x][static_cast<std::size_t>(d)] += pj * in.dout(b, i, h, d);
      }
    }
  }
  for (int x = 0; x < 2; ++x) {
    finish(dk[x], p.scale(), precisions[x]);
    finish(dv[x], 1.0, precisions[x]);
    GradientValues& to = x == 0 ? out.exact : out.plain;
    to.dk.insert(to.dk.end(), dk[x].begin(), dk[x].end());
    to.dv.insert(to.dv.end(), dv[x].begin(), dv[x].end());
  }
}

/// The sampled rows' reference and plain backward, computed row by row here:
/// reference::backward computes every row.
Expected sampled_expected(const BackwardCase& c, const InputViews& in) {
  const Problem& p = c.problem;
  if (p.dropout) throw std::invalid_argument("sampled rows do not model dropout: sample_rows 0");
  Expected e{spread_rows(c.sample_rows, p.batch, p.heads_q, p.seqlen_q),
             spread_rows(c.sample_rows, p.batch, p.heads_kv, p.seqlen_k),
             {},
             {},
             {}};
  for (const SampledRow& row : e.query_rows) add_query_row(c, in, row, {e.exact, e.plain});
  GroupStats stats;
  std::pair<std::int64_t, std::int64_t> stats_of = {-1, -1};  // (batch, kv head) of `stats`
  for (const SampledRow& row : e.key_rows) {
    if (stats_of != std::pair{row.batch, row.head}) {
      stats = group_stats(c, in, row.batch, row.head);
      stats_of = {row.batch, row.head};
    }
    add_key_row(c, in, stats, row, {e.exact, e.plain});
  }
  return e;
}

/// The bits of a run's three gradients.
struct GradientBits {
  std::vector<std::uint16_t> dq, dk, dv;
};

/// A case's tensors in the runtime's memory, and the library's forward and backward on them.
class DeviceCase {
 public:
  DeviceCase(Runtime& runtime, const BackwardCase& c, const Inputs& in)
      : runtime_(runtime),
        c_(c),
        attention_(c.attention()),
        q_(upload(runtime, in.q.bits)),
        k_(upload(runtime, in.k.bits)),
        v_(upload(runtime, in.v.bits)),
        dout_(upload(runtime, in.dout.bits)),
        o_(poisoned(in.dout.bits.size())),
        dq_(poisoned(in.q.bits.size())),
        dk_(poisoned(in.k.bits.size())),
        dv_(poisoned(in.v.bits.size())),
        lse_(upload(runtime,
                    std::vector<float>(lse_count(), std::numeric_limits<float>::quiet_NaN()))) {}

  /// O and LSE from the runtime's forward (its own config), as training computes them.
  void forward() {
    runtime_.forward(attention_, q_view(q_), kv_view(k_), v_view(v_), o_view(o_), lse_view());
    runtime_.synchronize();
  }

  /// dQ, dK, dV from the backward with `config` (or the runtime's choice), poisoned first so
  /// that an element the kernels never write fails the check.
  void backward(const std::optional<kernels::BackwardConfig>& config) {
    poison(dq_);
    poison(dk_);
    poison(dv_);
    if (config) {
      kernels::attention_backward(detail::backend_of(runtime_), attention_, q_view(q_), kv_view(k_),
                                  v_view(v_), o_view(o_), lse_view(), o_view(dout_), q_view(dq_),
                                  kv_view(dk_), v_view(dv_), *config, nullptr);
    } else {
      runtime_.backward(attention_, q_view(q_), kv_view(k_), v_view(v_), o_view(o_), lse_view(),
                        o_view(dout_), q_view(dq_), kv_view(dk_), v_view(dv_));
    }
    runtime_.synchronize();
  }

  GradientBits gradients() const { return {read(dq_), read(dk_), read(dv_)}; }
  std::vector<std::uint16_t> out() const { return read(o_); }

  /// Replaces Q (0), K (1) or V (2) with `bits`.
  void set_input(int which, const std::vector<std::uint16_t>& bits) {
    DeviceBuffer& buffer = which == 0 ? q_ : which == 1 ? k_ : v_;
    runtime_.copy_to_device(buffer.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
  }

 private:
  std::size_t lse_count() const {
    const Problem& p = c_.problem;
    return static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q);
  }
  DeviceBuffer poisoned(std::size_t count) {
    return upload(runtime_, std::vector<std::uint16_t>(count, kPoison));
  }
  void poison(DeviceBuffer& buffer) {
    const std::vector<std::uint16_t> bits(buffer.size() / sizeof(std::uint16_t), kPoison);
    runtime_.copy_to_device(buffer.data(), bits.data(), buffer.size());
  }
  std::vector<std::uint16_t> read(const DeviceBuffer& buffer) const {
    std::vector<std::uint16_t> bits(buffer.size() / sizeof(std::uint16_t));
    runtime_.copy_to_host(bits.data(), buffer.data(), buffer.size());
    return bits;
  }
  TensorView view(const DeviceBuffer& buffer, std::int64_t seqlen, std::int64_t heads,
                  std::int64_t head_dim) const {
    return attention_tensor(buffer.data(), c_.dtype, library_layout(c_.layout), c_.problem.batch,
                            seqlen, heads, head_dim);
  }
  TensorView q_view(const DeviceBuffer& b) const {  // Q and dQ
    return view(b, c_.problem.seqlen_q, c_.problem.heads_q, c_.problem.head_dim);
  }
  TensorView kv_view(const DeviceBuffer& b) const {  // K and dK
    return view(b, c_.problem.seqlen_k, c_.problem.heads_kv, c_.problem.head_dim);
  }
  TensorView o_view(const DeviceBuffer& b) const {  // O and dO
    return view(b, c_.problem.seqlen_q, c_.problem.heads_q, c_.problem.value_dim());
  }
  TensorView v_view(const DeviceBuffer& b) const {  // V and dV
    return view(b, c_.problem.seqlen_k, c_.problem.heads_kv, c_.problem.value_dim());
  }
  TensorView lse_view() const { return lse_tensor(static_cast<float*>(lse_.data()), attention_); }

  Runtime& runtime_;
  const BackwardCase& c_;
  Attention attention_;
  DeviceBuffer q_, k_, v_, dout_, o_, dq_, dk_, dv_, lse_;
};

/// The bound on a gradient's relative L2 error: twice the plain backward's, with a tiny floor
/// for when the plain backward is exact to the last bit (one key and one query, say) and the
/// kernels' fp32 sums still round differently. A reference that is exactly 0 (one key: P = 1,
/// so dS = dP − D = 0 and dQ = dK = 0) makes the checker's error absolute (checker.hpp); the
/// floor is then 1e-5 root mean square per element, far below any real gradient's scale.
double gradient_bound(double plain_error, const std::vector<double>& exact) {
  constexpr double kFloor = 1e-5;
  const bool zero = std::all_of(exact.begin(), exact.end(), [](double x) { return x == 0; });
  const double floor = zero ? kFloor * std::sqrt(static_cast<double>(exact.size())) : kFloor;
  return std::max(2 * plain_error, floor);
}

/// One gradient's verdict: `actual` (all of it) or its sampled rows `compared` against the
/// reference, and every element of `actual` written.
GradientVerdict judge_gradient(const std::vector<double>& actual,
                               const std::vector<double>& compared,
                               const std::vector<double>& exact, double plain_error,
                               const std::string& label, bool sampled) {
  GradientVerdict v;
  v.plain_error = plain_error;
  v.bound = gradient_bound(v.plain_error, exact);
  v.check =
      reference::check_close(compared, exact, v.bound, sampled ? label + " (sampled rows)" : label);
  v.error = v.check.rel_l2;
  if (sampled) {  // the rows not compared must still have been written
    check_every_element_finite(actual, label, v.check);
  }
  return v;
}

/// Where two runs' gradients differ: "" when every bit is the same.
std::string first_difference(const GradientBits& a, const GradientBits& b) {
  std::string report;
  auto compare = [&](const std::vector<std::uint16_t>& x, const std::vector<std::uint16_t>& y,
                     const char* name) {
    std::size_t count = 0, first = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i] != y[i] && count++ == 0) first = i;
    }
    if (count == 0) return;
    report += std::string(report.empty() ? "" : "; ") + name + " differs between two runs at " +
              std::to_string(count) + " of " + std::to_string(x.size()) +
              " elements, the first at flat index " + std::to_string(first);
  };
  compare(a.dq, b.dq, "dQ");
  compare(a.dk, b.dk, "dK");
  compare(a.dv, b.dv, "dV");
  return report;
}

/// Where dK or dV is not exactly zero at a key no query sees ("" when nowhere): no score
/// reaches such a key, so nothing may be added to its gradients, not even rounding.
std::string unseen_key_gradients(const BackwardCase& c, const std::vector<double>& dk,
                                 const std::vector<double>& dv) {
  const Problem& p = c.problem;
  const ConstView4 views[2] = {
      {dk.data(), p.kv_shape(), reference::dense_strides(p.kv_shape(), c.layout)},
      {dv.data(), p.v_shape(), reference::dense_strides(p.v_shape(), c.layout)}};
  std::int64_t count = 0;
  std::string first;
  for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
    if (p.key_seen(j)) continue;
    for (int which = 0; which < 2; ++which) {
      for (std::int64_t b = 0; b < p.batch; ++b) {
        for (std::int64_t h = 0; h < p.heads_kv; ++h) {
          for (std::int64_t d = 0; d < views[which].shape[3]; ++d) {
            const double x = views[which](b, j, h, d);
            if (x == 0) continue;
            if (count++ == 0) {
              std::ostringstream s;
              s << (which == 0 ? "dK" : "dV") << "(" << b << ", " << j << ", " << h << ", " << d
                << ") = " << x;
              first = s.str();
            }
          }
        }
      }
    }
  }
  if (count == 0) return "";
  return std::to_string(count) + " elements of dK/dV at keys no query sees are not 0, the first " +
         first;
}

PlainBackwardErrors plain_errors(const Expected& e) {
  const GradientValues& f = e.plain_fp32_sums;
  return {plain_error(e.exact.dq, e.plain.dq, f.dq), plain_error(e.exact.dk, e.plain.dk, f.dk),
          plain_error(e.exact.dv, e.plain.dv, f.dv)};
}

BackwardVerdict judge(const BackwardCase& c, const Expected& e, const GradientBits& bits) {
  const Problem& p = c.problem;
  const bool sampled = c.sample_rows > 0;
  const std::vector<double> dq = widen(c.dtype, bits.dq), dk = widen(c.dtype, bits.dk),
                            dv = widen(c.dtype, bits.dv);
  auto compared = [&](const std::vector<double>& all, const reference::Shape4& shape,
                      const std::vector<SampledRow>& rows) {
    return sampled ? gather(all, shape, c.layout, rows) : all;
  };
  BackwardVerdict v;
  const PlainBackwardErrors plain = plain_errors(e);
  v.dq = judge_gradient(dq, compared(dq, p.q_shape(), e.query_rows), e.exact.dq, plain.dq, "dQ",
                        sampled);
  v.dk = judge_gradient(dk, compared(dk, p.kv_shape(), e.key_rows), e.exact.dk, plain.dk, "dK",
                        sampled);
  v.dv = judge_gradient(dv, compared(dv, p.v_shape(), e.key_rows), e.exact.dv, plain.dv, "dV",
                        sampled);
  v.unseen_keys = unseen_key_gradients(c, dk, dv);
  v.ok = v.dq.check.ok && v.dk.check.ok && v.dv.check.ok && v.unseen_keys.empty();
  return v;
}

/// The loss L = Σ w ∘ O of a forward's O, summed in float64 so the sum adds no rounding.
double loss(const std::vector<double>& o, const RoundedTensor& w) {
  double sum = 0;
  for (std::size_t i = 0; i < o.size(); ++i) sum += w.values.values[i] * o[i];
  return sum;
}

/// The logical (batch, seqlen, head) of flat index `index` of a dense tensor.
std::array<std::int64_t, 3> unflatten(std::size_t index, const reference::Shape4& shape,
                                      Layout layout) {
  const reference::Shape4 strides = reference::dense_strides(shape, layout);
  const auto flat = static_cast<std::int64_t>(index);
  auto coordinate = [&](int axis) { return flat / strides[axis] % shape[axis]; };
  return {coordinate(0), coordinate(1), coordinate(2)};
}

/// The standard deviation of L₊ − L₋ that rounding explains, for element `index` of Q (0), K
/// (1) or V (2): each O element the element can move (its query row; or every row of the
/// group's heads that sees its key) carries up to u · (|O| + max|V|) of rounding, its own and
/// that of P rounded to the dtype for P V; taken as uniform (variance bound² / 3) and
/// independent across elements and the two runs.
double loss_noise(const BackwardCase& c, const Inputs& in, const std::vector<double>& o, int which,
                  std::size_t index) {
  const Problem& p = c.problem;
  double max_v = 0;
  for (double x : in.v.values.values) max_v = std::max(max_v, std::abs(x));
  const ConstView4 o_view{o.data(), p.o_shape(), reference::dense_strides(p.o_shape(), c.layout)};
  const ConstView4 w = in.dout.values.view();
  double variance = 0;
  auto add_row = [&](std::int64_t b, std::int64_t i, std::int64_t h) {
    for (std::int64_t d = 0; d < p.value_dim(); ++d) {
      const double bound = unit_roundoff(c.dtype) * (std::abs(o_view(b, i, h, d)) + max_v);
      variance += 2 * w(b, i, h, d) * w(b, i, h, d) * bound * bound / 3;  // two runs
    }
  };
  if (which == 0) {
    const auto [b, i, h] = unflatten(index, p.q_shape(), c.layout);
    add_row(b, i, h);
    return std::sqrt(variance);
  }
  const auto [b, j, hk] = unflatten(index, which == 1 ? p.kv_shape() : p.v_shape(), c.layout);
  const std::int64_t group = p.heads_q / p.heads_kv;
  for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
      if (p.visible(i, j)) add_row(b, i, h);
    }
  }
  return std::sqrt(variance);
}

/// One perturbed element's check, appended to `verdict`.
struct Perturbed {
  int which;          ///< Q (0), K (1) or V (2)
  std::size_t index;  ///< flat, in the case's layout
  double gradient;    ///< the backward's
  double gradient_scale;
};

void check_difference(DeviceCase& device, const BackwardCase& c, Inputs& in,
                      const std::vector<double>& o, const Perturbed& x, double step,
                      FiniteDifferenceVerdict& verdict) {
  RoundedTensor& input = x.which == 0 ? in.q : x.which == 1 ? in.k : in.v;
  const std::uint16_t original = input.bits[x.index];
  const double value = input.values.values[x.index];
  const std::uint16_t up = to_bits(c.dtype, value + step), down = to_bits(c.dtype, value - step);
  auto loss_at = [&](std::uint16_t bits) {
    input.bits[x.index] = bits;
    device.set_input(x.which, input.bits);
    device.forward();
    return loss(widen(c.dtype, device.out()), in.dout);
  };
  const double moved = from_bits(c.dtype, up) - from_bits(c.dtype, down);
  const double difference = (loss_at(up) - loss_at(down)) / moved;
  input.bits[x.index] = original;
  device.set_input(x.which, input.bits);
  // Four standard deviations of the loss's rounding (each a bound already), and four units of
  // the gradient's own.
  const double tolerance = 4 * loss_noise(c, in, o, x.which, x.index) / moved +
                           4 * unit_roundoff(c.dtype) * x.gradient_scale;
  const bool ok = std::abs(x.gradient - difference) <= tolerance;
  verdict.ok = verdict.ok && ok;
  std::ostringstream line;
  line << "d"
       << "qkv"[x.which] << "[" << x.index << "]: gradient " << x.gradient
       << ", central difference " << difference << " (step " << moved / 2 << "), off by "
       << std::abs(x.gradient - difference) << ", tolerance " << tolerance << (ok ? "" : "  FAILED")
       << "\n";
  verdict.report += line.str();
}
}  // namespace

std::string BackwardCase::name() const {
  return as_forward(*this).name() + (deterministic ? ".deterministic" : "");
}

Attention BackwardCase::attention() const {
  Attention attention = as_forward(*this).attention();
  attention.deterministic = deterministic;
  return attention;
}

std::string BackwardVerdict::describe() const {
  std::ostringstream s;
  s << (ok ? "ok" : "FAILED");
  for (const auto& [name, g] : {std::pair{"dQ", &dq}, {"dK", &dk}, {"dV", &dv}}) {
    s << "\n  " << name << " error " << g->error << " (plain " << g->plain_error << ", bound "
      << g->bound << "): " << g->check.describe();
  }
  if (!deterministic) s << "\n  not deterministic: " << determinism;
  if (!unseen_keys.empty()) s << "\n  " << unseen_keys;
  return s.str();
}

struct BackwardCaseRunner::State {
  BackwardCase c;
  Inputs in;
  Expected expected;
};

BackwardCaseRunner::BackwardCaseRunner(const BackwardCase& c) {
  Inputs in = make_inputs(c);
  Expected e = c.sample_rows > 0 ? sampled_expected(c, views(in)) : full_expected(c, views(in));
  state_ = std::make_unique<State>(State{c, std::move(in), std::move(e)});
}

BackwardCaseRunner::~BackwardCaseRunner() = default;
BackwardCaseRunner::BackwardCaseRunner(BackwardCaseRunner&&) noexcept = default;
BackwardCaseRunner& BackwardCaseRunner::operator=(BackwardCaseRunner&&) noexcept = default;

BackwardVerdict BackwardCaseRunner::run(
    Runtime& runtime, const std::optional<kernels::BackwardConfig>& config) const {
  const BackwardCase& c = state_->c;
  DeviceCase device(runtime, c, state_->in);
  device.forward();
  device.backward(config);
  const GradientBits first = device.gradients();
  BackwardVerdict verdict = judge(c, state_->expected, first);
  if (c.check_determinism) {
    device.backward(config);
    verdict.determinism = first_difference(first, device.gradients());
    verdict.deterministic = verdict.determinism.empty();
    verdict.ok = verdict.ok && verdict.deterministic;
  }
  return verdict;
}

BackwardVerdict run_backward_case(Runtime& runtime, const BackwardCase& c,
                                  const std::optional<kernels::BackwardConfig>& config) {
  return BackwardCaseRunner(c).run(runtime, config);
}

PlainBackwardErrors plain_backward_errors(const BackwardCase& c) {
  const Inputs in = make_inputs(c);
  return plain_errors(full_expected(c, views(in)));
}

FiniteDifferenceVerdict check_finite_differences(Runtime& runtime, const BackwardCase& c,
                                                 int perturbed, double step) {
  Inputs in = make_inputs(c);  // dO = w
  DeviceCase device(runtime, c, in);
  device.forward();
  const std::vector<double> o = widen(c.dtype, device.out());
  device.backward(std::nullopt);
  const GradientBits bits = device.gradients();
  const std::vector<double> gradients[3] = {widen(c.dtype, bits.dq), widen(c.dtype, bits.dk),
                                            widen(c.dtype, bits.dv)};
  FiniteDifferenceVerdict verdict{true, ""};
  std::mt19937_64 random(c.seed);
  for (int which = 0; which < 3; ++which) {
    const std::vector<double>& g = gradients[which];
    double scale = 0;
    for (double x : g) scale = std::max(scale, std::abs(x));
    for (int n = 0; n < perturbed; ++n) {
      const std::size_t index = random() % g.size();
      check_difference(device, c, in, o, {which, index, g[index], scale}, step, verdict);
    }
  }
  return verdict;
}

}  // namespace flashjit::testing
