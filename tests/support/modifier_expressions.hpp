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

#include <string>

#include "attention/modifiers/modifier_grammar.hpp"

namespace flashjit::testing {

/// A score_mod calling every function of the modifier grammar once (the casts on an index,
/// the others on the score, two-argument ones with a float second), so that a function the
/// grammar accepts but no backend defines fails to compile where this is compiled: NVRTC's
/// forward and backward, the emulator's host compiler, `flashjit run`'s reference.
inline std::string every_function_score_mod() {
  std::string text = "score";
  for (const kernels::ModifierFunction& f : kernels::modifier_functions()) {
    const std::string name(f.name);
    if (name == "float" || name == "int") {
      text += " + 0.001f * " + name + "(q_idx - kv_idx)";
    } else if (f.arity == 1) {
      text += " + 0.01f * " + name + "(score * 0.25f + 2.5f)";
    } else {
      text += " + 0.01f * " + name + "(score * 0.25f + 2.5f, 1.5f)";
    }
  }
  return text;
}

/// A mask_mod calling the integer forms: min, max and abs of ints stay ints.
inline std::string every_function_mask_mod() {
  return "abs(q_idx - kv_idx) % 7 != 3 && min(q_idx, kv_idx) + max(b, h) >= 0";
}

}  // namespace flashjit::testing
