#include "attention/check/attention_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace flashjit::reference {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("flashjit::reference: " + message);
}

void require_shape(const char* name, ConstView4 view, const Shape4& expected) {
  require(view.data != nullptr, std::string(name) + " is null");
  require(view.shape == expected, std::string(name) + " has shape " + shape_string(view.shape) +
                                      ", expected " + shape_string(expected));
}

void require_inputs(const Problem& problem, ConstView4 q, ConstView4 k, ConstView4 v) {
  problem.validate();
  require_shape("q", q, problem.q_shape());
  require_shape("k", k, problem.kv_shape());
  require_shape("v", v, problem.v_shape());
}

// The key range with end = -1 resolved, checked against seqlen_k.
KeyRange resolve(KeyRange keys, int64_t seqlen_k) {
  if (keys.end < 0) keys.end = seqlen_k;
  require(0 <= keys.begin && keys.begin <= keys.end && keys.end <= seqlen_k,
          "key range [" + std::to_string(keys.begin) + ", " + std::to_string(keys.end) +
              ") is not inside [0, seqlen_k = " + std::to_string(seqlen_k) + "]");
  return keys;
}

// d score / d (q.k) for a visible pair whose soft-capped score (before a score modifier) is s:
// the scale, times 1 - tanh^2 when softcapped (d/dx of c tanh(x/c) = 1 - tanh^2(x/c), and
// tanh(x/c) = s/c), times the score modifier's slope.
double score_derivative(const Problem& problem, double s, int64_t b, int64_t h, int64_t i,
                        int64_t j) {
  const double t = problem.softcap > 0 ? s / problem.softcap : 0.0;
  return problem.scale() * (1.0 - t * t) * problem.modified_slope(s, b, h, i, j);
}

// One query row's attention over a key range: masked scores, probabilities and LSE.
struct RowSoftmax {
  std::vector<double> scores;   // (keys.end - keys.begin), -inf where masked
  std::vector<double> slopes;   // d score / d (q.k) where visible, for the backward
  std::vector<double> probs;    // (keys.end - keys.begin)
  std::vector<double> factors;  // Z: 0 dropped, 1 / (1 - p) kept (1 without dropout)
  double lse = kNegInf;
};

void attend_row(const Problem& problem, ConstView4 q, ConstView4 k, int64_t b, int64_t h, int64_t i,
                KeyRange keys, RowSoftmax& row, bool slopes = false) {
  const int64_t kv_h = problem.kv_head(h);
  const int64_t n = keys.end - keys.begin;
  row.scores.assign(static_cast<size_t>(n), kNegInf);
  row.slopes.assign(slopes ? static_cast<size_t>(n) : 0, 0.0);
  for (int64_t jj = 0; jj < n; ++jj) {
    const int64_t j = keys.begin + jj;
    if (!problem.sees(b, h, i, j)) continue;
    double dot = 0.0;  // q_i . k_j
    for (int64_t d = 0; d < problem.head_dim; ++d) dot += q(b, i, h, d) * k(b, j, kv_h, d);
    double s = problem.scale() * dot;
    if (problem.softcap > 0) s = problem.softcap * std::tanh(s / problem.softcap);
    row.scores[static_cast<size_t>(jj)] = problem.modified(s, b, h, i, j);
    if (slopes) row.slopes[static_cast<size_t>(jj)] = score_derivative(problem, s, b, h, i, j);
  }
  row.probs = row.scores;
  row.lse = softmax_in_place(row.probs.data(), n);
  if (!problem.sinks.empty()) {
    // The sink's term in the denominator: every probability shrinks by e^(LSE − LSE').
    const double with_sink = log_add_exp(row.lse, problem.sinks[static_cast<size_t>(h)]);
    const double shrink = row.lse == kNegInf ? 0.0 : std::exp(row.lse - with_sink);
    for (double& p : row.probs) p *= shrink;
    row.lse = with_sink;
  }
  row.factors.assign(static_cast<size_t>(n), 1.0);
  if (problem.dropout) {
    for (int64_t jj = 0; jj < n; ++jj) {
      row.factors[static_cast<size_t>(jj)] = problem.dropout(b, h, i, keys.begin + jj);
    }
  }
}

// O[i, d] = sum_j P[i, j] Z[i, j] V[j, d] over the row's key range (Z: dropout's factors).
double output_element(ConstView4 v, int64_t b, int64_t kv_h, int64_t d, KeyRange keys,
                      const RowSoftmax& row) {
  double acc = 0.0;
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    const auto jj = static_cast<size_t>(j - keys.begin);
    acc += row.probs[jj] * row.factors[jj] * v(b, j, kv_h, d);  // (P ∘ Z) V
  }
  return acc;
}

// The tensors of a backward pass, bundled so the per-row step takes them as one argument.
struct BackwardViews {
  ConstView4 q, k, v, dout;
  View4 dq, dk, dv;
};

// Adds query row (b, h, i)'s contribution to dQ_i, dK and dV, given its softmax over all keys.
void backprop_row(const Problem& problem, const BackwardViews& t, int64_t b, int64_t h, int64_t i,
                  const RowSoftmax& row) {
  if (row.lse == kNegInf) return;  // fully masked row: O = 0 and no gradient flows
  const int64_t kv_h = problem.kv_head(h);
  const int64_t dim = problem.head_dim, value_dim = problem.value_dim();
  double delta = 0.0;  // D_i = dO_i . O_i, with O_i = P_i V recomputed
  for (int64_t d = 0; d < value_dim; ++d)
    delta += t.dout(b, i, h, d) * output_element(t.v, b, kv_h, d, {0, problem.seqlen_k}, row);
  for (int64_t j = 0; j < problem.seqlen_k; ++j) {
    if (row.scores[j] == kNegInf) continue;  // masked: P = 0, dS = 0
    const double p = row.probs[j];
    double dp = 0.0;  // dP_ij = Z_ij dO_i . V_j: the gradient of the undropped P
    for (int64_t d = 0; d < value_dim; ++d) dp += t.dout(b, i, h, d) * t.v(b, j, kv_h, d);
    dp *= row.factors[j];
    const double ds = p * (dp - delta);    // dS = P (dP - D)
    const double dx = ds * row.slopes[j];  // d loss / d (q.k)
    for (int64_t d = 0; d < dim; ++d) {
      t.dq(b, i, h, d) += dx * t.k(b, j, kv_h, d);  // dQ = dS K scale
      t.dk(b, j, kv_h, d) += dx * t.q(b, i, h, d);  // dK = dSᵀ Q scale
    }
    for (int64_t d = 0; d < value_dim; ++d) {
      t.dv(b, j, kv_h, d) += p * row.factors[j] * t.dout(b, i, h, d);  // dV = (P ∘ Z)ᵀ dO
    }
  }
}

}  // namespace

void Problem::validate() const {
  require(batch > 0, "batch must be > 0");
  require(heads_q > 0 && heads_kv > 0, "heads_q and heads_kv must be > 0");
  require(heads_q % heads_kv == 0, "heads_q must be a multiple of heads_kv");
  require(seqlen_q > 0 && seqlen_k > 0, "seqlen_q and seqlen_k must be > 0");
  require(head_dim > 0, "head_dim must be > 0");
  require(!softmax_scale || std::isfinite(*softmax_scale), "softmax_scale must be finite");
  require(window_left >= -1 && window_right >= -1, "window_left/right must be >= -1");
  require(std::isfinite(softcap) && softcap >= 0, "softcap must be finite and >= 0 (0 = off)");
  require(sinks.empty() || static_cast<int64_t>(sinks.size()) == heads_q,
          "sinks must hold one logit per query head (or none)");
}

double Problem::scale() const {
  return softmax_scale ? *softmax_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

bool Problem::visible(int64_t i, int64_t j) const {
  if (j < 0 || j >= seqlen_k) return false;
  const int64_t diagonal = i + seqlen_k - seqlen_q;  // bottom-right alignment
  // Causal is a right window of 0; it is also min(0, window_right) for any window_right >= 0.
  const int64_t right = causal ? 0 : window_right;
  const bool left_ok = window_left < 0 || j >= diagonal - window_left;
  const bool right_ok = right < 0 || j <= diagonal + right;
  return left_ok && right_ok;
}

bool Problem::key_seen(int64_t j) const {
  if (j < 0 || j >= seqlen_k) return false;
  // visible(i, j) holds for i in [j - offset - right, j - offset + left]: intersect with the rows.
  const int64_t offset = seqlen_k - seqlen_q;
  const int64_t right = causal ? 0 : window_right;
  const int64_t first = right < 0 ? 0 : std::max<int64_t>(0, j - offset - right);
  const int64_t last =
      window_left < 0 ? seqlen_q - 1 : std::min(seqlen_q - 1, j - offset + window_left);
  return first <= last;
}

ForwardResult forward(const Problem& problem, ConstView4 q, ConstView4 k, ConstView4 v,
                      KeyRange keys, Layout out_layout) {
  require_inputs(problem, q, k, v);
  keys = resolve(keys, problem.seqlen_k);
  const auto lse_count = static_cast<size_t>(problem.batch * problem.heads_q * problem.seqlen_q);
  ForwardResult result{zeros(problem.o_shape(), out_layout), std::vector<double>(lse_count)};
  const View4 out = result.out.view();
  RowSoftmax row;
  for (int64_t b = 0; b < problem.batch; ++b)
    for (int64_t h = 0; h < problem.heads_q; ++h)
      for (int64_t i = 0; i < problem.seqlen_q; ++i) {
        attend_row(problem, q, k, b, h, i, keys, row);
        result.lse_at(b, h, i) = row.lse;
        const int64_t kv_h = problem.kv_head(h);
        for (int64_t d = 0; d < problem.value_dim(); ++d)
          out(b, i, h, d) = output_element(v, b, kv_h, d, keys, row);
      }
  return result;
}

Gradients backward(const Problem& problem, ConstView4 q, ConstView4 k, ConstView4 v,
                   ConstView4 dout, Layout grad_layout) {
  require_inputs(problem, q, k, v);
  require_shape("dout", dout, problem.o_shape());
  require(!problem.score_mod || problem.score_mod_slope,
          "the backward reference needs score_mod_slope with a score_mod");
  Gradients g{zeros(problem.q_shape(), grad_layout), zeros(problem.kv_shape(), grad_layout),
              zeros(problem.v_shape(), grad_layout)};
  const BackwardViews views{q, k, v, dout, g.dq.view(), g.dk.view(), g.dv.view()};
  RowSoftmax row;
  for (int64_t b = 0; b < problem.batch; ++b)
    for (int64_t h = 0; h < problem.heads_q; ++h)
      for (int64_t i = 0; i < problem.seqlen_q; ++i) {
        attend_row(problem, q, k, b, h, i, {0, problem.seqlen_k}, row, /*slopes=*/true);
        backprop_row(problem, views, b, h, i, row);
      }
  return g;
}

std::vector<double> sinks_gradient(const Problem& problem, ConstView4 q, ConstView4 k,
                                   ConstView4 v, ConstView4 dout) {
  require_inputs(problem, q, k, v);
  require(static_cast<int64_t>(problem.sinks.size()) == problem.heads_q,
          "sinks_gradient needs one sink per query head");
  std::vector<double> grad(problem.sinks.size(), 0.0);
  RowSoftmax row;
  for (int64_t b = 0; b < problem.batch; ++b)
    for (int64_t h = 0; h < problem.heads_q; ++h)
      for (int64_t i = 0; i < problem.seqlen_q; ++i) {
        attend_row(problem, q, k, b, h, i, {0, problem.seqlen_k}, row);
        double delta = 0.0;  // D_i = dO_i . O_i
        for (int64_t d = 0; d < problem.value_dim(); ++d) {
          delta += dout(b, i, h, d) *
                   output_element(v, b, problem.kv_head(h), d, {0, problem.seqlen_k}, row);
        }
        grad[static_cast<size_t>(h)] -=
            std::exp(problem.sinks[static_cast<size_t>(h)] - row.lse) * delta;
      }
  return grad;
}

double log_add_exp(double a, double b) {
  if (a == kNegInf && b == kNegInf) return kNegInf;  // both empty; -inf - -inf would be NaN
  const double hi = std::max(a, b);
  const double lo = std::min(a, b);
  return hi + std::log1p(std::exp(lo - hi));
}

ForwardResult combine(const ForwardResult& first, const ForwardResult& second) {
  const Shape4 shape = first.out.shape;  // {batch, seqlen_q, heads_q, head_dim}
  require(second.out.shape == shape, "combine: O shapes differ: " + shape_string(shape) + " vs " +
                                         shape_string(second.out.shape));
  require(first.lse.size() == second.lse.size(), "combine: LSE sizes differ");
  ForwardResult merged{zeros(shape, first.out.layout), std::vector<double>(first.lse.size())};
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t h = 0; h < shape[2]; ++h)
      for (int64_t i = 0; i < shape[1]; ++i) {
        const double lse1 = first.lse_at(b, h, i), lse2 = second.lse_at(b, h, i);
        const double lse = log_add_exp(lse1, lse2);
        merged.lse_at(b, h, i) = lse;
        if (lse == kNegInf) continue;  // empty in both halves: O stays 0
        const double w1 = std::exp(lse1 - lse), w2 = std::exp(lse2 - lse);
        for (int64_t d = 0; d < shape[3]; ++d)
          merged.out(b, i, h, d) = w1 * first.out(b, i, h, d) + w2 * second.out(b, i, h, d);
      }
  return merged;
}

ForwardResult merge_states(std::span<const ForwardResult> partials) {
  require(!partials.empty(), "merge_states: no partial results");
  // Pairwise merges are exact in real arithmetic, and float64 keeps them far below any
  // kernel's error: the two-way combiner folded over the list is the N-way one.
  ForwardResult merged = partials.front();
  for (const ForwardResult& partial : partials.subspan(1)) merged = combine(merged, partial);
  return merged;
}

}  // namespace flashjit::reference
