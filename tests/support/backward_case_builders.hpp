#pragma once
// Small builders of backward test cases, shared by the emulated and the GPU suites so both
// describe shapes the same way (and draw the same seeds); with_dtype, with_layout and
// with_softcap come from case_builders.hpp.
#include <cstdint>

#include "attention/check/backward_case.hpp"
#include "support/case_builders.hpp"

namespace flashjit::testing {

/// A batch-1 case; the seed is derived from the shape, 5 past the forward case's of the same
/// shape (the backward suites' inputs were drawn with it).
inline BackwardCase make_case(std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seqlen_q,
                              std::int64_t seqlen_k, std::int64_t head_dim, bool causal = false) {
  return sized_case<BackwardCase>(heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal, 5);
}

/// In the deterministic mode (Attention::deterministic), and runs the backward a second time
/// requiring the same bits.
inline BackwardCase deterministic(BackwardCase c) {
  c.deterministic = true;
  c.check_determinism = true;
  return c;
}

/// A single-head case with window sides `left` and `right` (-1: unbounded).
inline BackwardCase windowed(std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t left,
                             std::int64_t right, std::int64_t head_dim = 64) {
  return with_window(make_case(1, 1, seqlen_q, seqlen_k, head_dim), left, right);
}

}  // namespace flashjit::testing
