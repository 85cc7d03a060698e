#pragma once
// Builders of attention test cases that serve forward (ForwardCase) and backward (BackwardCase)
// cases alike: both carry a reference::Problem, a dtype, a layout and a seed. The per-direction
// headers (forward_case_builders.hpp, backward_case_builders.hpp) name their make_case on top.
#include <cstdint>

#include "attention/check/attention_reference.hpp"
#include "flashjit/dtype.hpp"

namespace flashjit::testing {

/// A batch-1 case of these sizes; its seed follows from the shape (plus `seed_offset`), so that
/// a suite's cases draw the same inputs on every backend and every run.
template <class Case>
Case sized_case(std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seqlen_q,
                std::int64_t seqlen_k, std::int64_t head_dim, bool causal,
                std::uint64_t seed_offset) {
  Case c;
  c.problem.heads_q = heads_q;
  c.problem.heads_kv = heads_kv;
  c.problem.seqlen_q = seqlen_q;
  c.problem.seqlen_k = seqlen_k;
  c.problem.head_dim = head_dim;
  c.problem.causal = causal;
  c.seed = static_cast<std::uint64_t>(seqlen_q * 7919 + seqlen_k * 31 + head_dim) + seed_offset;
  return c;
}

template <class Case>
Case with_dtype(Case c, DType dtype) {
  c.dtype = dtype;
  return c;
}

template <class Case>
Case with_layout(Case c, reference::Layout layout) {
  c.layout = layout;
  return c;
}

template <class Case>
Case with_softcap(Case c, double softcap) {
  c.problem.softcap = softcap;
  return c;
}

/// `c` with window sides `left` and `right` (-1: unbounded).
template <class Case>
Case with_window(Case c, std::int64_t left, std::int64_t right) {
  c.problem.window_left = left;
  c.problem.window_right = right;
  return c;
}

}  // namespace flashjit::testing
