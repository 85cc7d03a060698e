#pragma once
// Score and mask modifiers written once for both sides of a test: each macro gives the
// expression's text (for the kernel) and host lambdas of the same expression (for the float64
// reference: a double score, int64 indices). The expressions are written as users write them,
// ints mixed into float arithmetic, so the including test turns off -Wconversion.
#include <cstdint>

/// The text and a host function of (score, b, h, q_idx, kv_idx).
#define SCORE_MOD(expr) \
#expr, [](double score, std::int64_t b, std::int64_t h, std::int64_t q_idx,                  \
            std::int64_t kv_idx) -> double {                                                   \
    (void)score, (void)b, (void)h, (void)q_idx, (void)kv_idx;                                  \
    return expr;                                                                               \
  }

/// As SCORE_MOD, then a host function of the derivative with respect to `score`, written by
/// hand (the backward's reference: independent of the kernels' dual numbers).
#define SCORE_MOD_WITH_SLOPE(expr, slope)                                  \
  SCORE_MOD(expr),                                                         \
      [](double score, std::int64_t b, std::int64_t h, std::int64_t q_idx, \
         std::int64_t kv_idx) -> double {                                  \
        (void)score, (void)b, (void)h, (void)q_idx, (void)kv_idx;          \
        return slope;                                                      \
      }

/// The text and a host function of (b, h, q_idx, kv_idx).
#define MASK_MOD(expr) \
#expr, [](std::int64_t b, std::int64_t h, std::int64_t q_idx, std::int64_t kv_idx) -> bool { \
    (void)b, (void)h, (void)q_idx, (void)kv_idx;                                               \
    return expr;                                                                               \
  }
