#include "multiscale/multiscale_reference.hpp"

#include <cmath>

namespace flashjit::reference {
namespace {

double apply(const Rounding& round, double x) { return round ? round(x) : x; }

/// One query row's masked scores S[j] = scale · q·k_j · M[h, i, j].
void row_scores(const MultiScaleProblem& p, ConstView4 q, ConstView4 k, std::int64_t b,
                std::int64_t h, std::int64_t i, std::vector<double>& s) {
  s.assign(static_cast<std::size_t>(p.seqlen_k), 0.0);
  for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
    double dot = 0;
    for (std::int64_t d = 0; d < p.head_dim; ++d) dot += q(b, i, h, d) * k(b, j, p.kv_head(h), d);
    s[static_cast<std::size_t>(j)] = p.scale * dot * p.mask_at(h, i, j);
  }
}

double abs_sum(const std::vector<double>& s) {
  double r = 0;
  for (double x : s) r += std::abs(x);
  return r;
}

}  // namespace

double MultiScaleProblem::mask_at(std::int64_t h, std::int64_t i, std::int64_t j) const {
  if (!decay) return mask[static_cast<std::size_t>((h * seqlen_q + i) * seqlen_k + j)];
  const std::int64_t distance = i + seqlen_k - seqlen_q - j;
  if (distance < 0) return 0.0;
  return distance == 0 ? 1.0 : std::pow(gammas[static_cast<std::size_t>(h)], double(distance));
}

MultiScaleOutputs multiscale_forward(const MultiScaleProblem& p, ConstView4 q, ConstView4 k,
                                     ConstView4 v, const Rounding& round) {
  MultiScaleOutputs out{zeros({p.batch, p.seqlen_q, p.heads_q, p.head_dim}, Layout::bshd), {}};
  out.rowsum.assign(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q), 0.0);
  std::vector<double> s;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        row_scores(p, q, k, b, h, i, s);
        for (double& x : s) x = apply(round, x);
        const double r = abs_sum(s);
        const double norm = std::max(r, 1.0);
        out.rowsum[static_cast<std::size_t>((b * p.heads_q + h) * p.seqlen_q + i)] = r;
        for (std::int64_t d = 0; d < p.head_dim; ++d) {
          double o = 0;
          for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
            o += apply(round, s[static_cast<std::size_t>(j)] / norm) * v(b, j, p.kv_head(h), d);
          }
          out.out(b, i, h, d) = apply(round, o);
        }
      }
  return out;
}

MultiScaleGradients multiscale_backward(const MultiScaleProblem& p, ConstView4 q, ConstView4 k,
                                        ConstView4 v, ConstView4 dout, const Rounding& round) {
  const MultiScaleOutputs forward = multiscale_forward(p, q, k, v, round);
  MultiScaleGradients g{
      zeros(q.shape, Layout::bshd), zeros(k.shape, Layout::bshd), zeros(v.shape, Layout::bshd), {}};
  g.dmask.assign(static_cast<std::size_t>(p.heads_q * p.seqlen_q * p.seqlen_k), 0.0);
  std::vector<double> s;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        const std::int64_t hk = p.kv_head(h);
        row_scores(p, q, k, b, h, i, s);
        const double r = abs_sum(s);
        const double norm = std::max(r, 1.0);
        double delta = 0;  // δ = dO · O
        for (std::int64_t d = 0; d < p.head_dim; ++d) {
          delta += dout(b, i, h, d) * forward.out(b, i, h, d);
        }
        for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
          const double a = s[static_cast<std::size_t>(j)];
          double dp = 0;  // dO · v_j
          for (std::int64_t d = 0; d < p.head_dim; ++d) dp += dout(b, i, h, d) * v(b, j, hk, d);
          dp = apply(round, dp);
          const double sign = a < 0 ? -1.0 : 1.0;
          const double da = apply(round, (dp - (r > 1.0 ? delta * sign : 0.0)) / norm);
          const double m = p.mask_at(h, i, j);
          double raw = 0;  // scale · q·k_j
          for (std::int64_t d = 0; d < p.head_dim; ++d) raw += q(b, i, h, d) * k(b, j, hk, d);
          raw *= p.scale;
          g.dmask[static_cast<std::size_t>((h * p.seqlen_q + i) * p.seqlen_k + j)] += da * raw;
          const double ds = da * m * p.scale;  // d(q·k_j)
          for (std::int64_t d = 0; d < p.head_dim; ++d) {
            g.dq(b, i, h, d) += ds * k(b, j, hk, d);
            g.dk(b, j, hk, d) += ds * q(b, i, h, d);
            g.dv(b, j, hk, d) += apply(round, a / norm) * dout(b, i, h, d);
          }
        }
      }
  for (Tensor4* t : {&g.dq, &g.dk, &g.dv})
    for (double& x : t->values) x = apply(round, x);
  return g;
}

}  // namespace flashjit::reference
