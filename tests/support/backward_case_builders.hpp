#pragma once
// Small builders of backward test cases, shared by the emulated and the GPU suites so both
// describe shapes the same way (and draw the same seeds).
#include <cstdint>

#include "support/backward_case.hpp"

namespace flashjit::testing {

/// A batch-1 case; the seed is derived from the shape.
inline BackwardCase make_case(std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seqlen_q,
                              std::int64_t seqlen_k, std::int64_t head_dim, bool causal = false) {
  BackwardCase c;
  c.problem.heads_q = heads_q;
  c.problem.heads_kv = heads_kv;
  c.problem.seqlen_q = seqlen_q;
  c.problem.seqlen_k = seqlen_k;
  c.problem.head_dim = head_dim;
  c.problem.causal = causal;
  c.seed = static_cast<std::uint64_t>(seqlen_q * 7919 + seqlen_k * 31 + head_dim + 5);
  return c;
}

inline BackwardCase with_dtype(BackwardCase c, DType dtype) {
  c.dtype = dtype;
  return c;
}

inline BackwardCase with_layout(BackwardCase c, reference::Layout layout) {
  c.layout = layout;
  return c;
}

/// Also runs the backward a second time and requires the same bits.
inline BackwardCase deterministic(BackwardCase c) {
  c.check_determinism = true;
  return c;
}

/// A single-head case with window sides `left` and `right` (-1: unbounded).
inline BackwardCase windowed(std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t left,
                             std::int64_t right, std::int64_t head_dim = 64) {
  BackwardCase c = make_case(1, 1, seqlen_q, seqlen_k, head_dim);
  c.problem.window_left = left;
  c.problem.window_right = right;
  return c;
}

inline BackwardCase with_softcap(BackwardCase c, double softcap) {
  c.problem.softcap = softcap;
  return c;
}

}  // namespace flashjit::testing
