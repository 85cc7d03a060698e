#pragma once
// One backward-attention test case end to end, for any backend: random Q, K, V and dO rounded
// to the kernel's dtype; the library's forward (for O and LSE, as training computes them), then
// its backward into poisoned dQ, dK, dV; each gradient judged against the float64 reference.
// The bar (docs/design.md, for gradients): each of dQ, dK, dV has a relative L2 error at
// most twice that of the plain backward computed in the input dtype (plain_backward_errors),
// with a tiny floor; no element is left unwritten; nothing is NaN. Optionally the backward runs
// twice and must give the same bits.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention/attention_backward.hpp"
#include "attention/check/attention_reference.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/runtime.hpp"
#include "reference/checker.hpp"

namespace flashjit::testing {

struct BackwardCase {
  reference::Problem problem;
  DType dtype = DType::bf16;
  reference::Layout layout = reference::Layout::bshd;
  std::uint64_t seed = 1;
  /// Attention::deterministic: dQ from its own kernel instead of atomic adds.
  bool deterministic = false;
  /// Run the backward a second time (the gradients poisoned again in between) and require
  /// bit-identical dQ, dK and dV: with `deterministic` no kernel uses atomics, so nothing may
  /// vary (the emulator runs blocks in one order, so its atomic sums repeat too).
  bool check_determinism = false;
  /// When > 0, the float64 reference and the plain baseline cover only this many rows per
  /// (batch, head) pair, spread over the sequence (the first and last included): dQ at query
  /// rows of up to three (batch, query head) pairs, dK and dV at key rows of up to three
  /// (batch, key/value head) pairs (first, middle, last). At real sizes the full reference
  /// takes far longer on the CPU than the kernels on the GPU. Every element of every gradient
  /// is still checked for having been written. 0: every row of every head.
  std::int64_t sample_rows = 0;
  /// Attention::captures, already in the runtime's memory (as ForwardCase::captures).
  std::vector<Capture> captures = {};

  /// "b2.hq8.hkv1.q17.k63.d64.bf16.bshd.causal..." for test messages (".deterministic" last).
  std::string name() const;
  /// The library's descriptor of the same problem.
  Attention attention() const;
};

/// One gradient's verdict.
struct GradientVerdict {
  double error = 0;        ///< the kernel's relative L2 error (absolute when the reference is 0)
  double plain_error = 0;  ///< that of the plain backward in the input dtype
  double bound = 0;        ///< the tolerance applied: 2 · plain_error, or the floor
  reference::CheckResult check;
};

struct BackwardVerdict {
  bool ok = false;
  GradientVerdict dq, dk, dv;
  bool deterministic = true;  ///< false when check_determinism found differing bits
  std::string determinism;    ///< which gradient differed, and where first
  /// Where dK or dV is not exactly zero at a key no query sees; "" when it is zero everywhere.
  std::string unseen_keys;
  std::string describe() const;
};

/// Runs `c` on `runtime` (host memory on the emulator, device memory on a GPU): the runtime's
/// forward, then its backward with `config`, or the runtime's own choice when none is given.
BackwardVerdict run_backward_case(Runtime& runtime, const BackwardCase& c,
                                  const std::optional<kernels::BackwardConfig>& config = {});

/// A case's inputs and reference, computed once: run() judges any number of runs of the case
/// (each config of a sweep, say) against them, so that a sweep costs one reference.
class BackwardCaseRunner {
 public:
  explicit BackwardCaseRunner(const BackwardCase& c);
  ~BackwardCaseRunner();
  BackwardCaseRunner(BackwardCaseRunner&&) noexcept;
  BackwardCaseRunner& operator=(BackwardCaseRunner&&) noexcept;

  /// As run_backward_case(runtime, c, config).
  BackwardVerdict run(Runtime& runtime,
                      const std::optional<kernels::BackwardConfig>& config = {}) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Relative L2 errors against the float64 reference of the textbook backward computed the plain
/// way in `c.dtype` (every row; sample_rows is ignored). Rounded to the dtype, each as it is
/// produced: S = scale · Q Kᵀ (soft-capped), P = softmax(S), O = P V, D = rowsum(dO ∘ O),
/// dP = dO Vᵀ, dS = P ∘ (dP − D) (and dS ∘ (1 − tanh²) with softcap, the slope exact), and the
/// products dV = Pᵀ dO, dQ = scale · dS K, dK = scale · dSᵀ Q. Every sum (the dot products, the
/// softmax's, the products' sums over keys, queries and a GQA group's heads) is exact.
struct PlainBackwardErrors {
  double dq = 0, dk = 0, dv = 0;
};
PlainBackwardErrors plain_backward_errors(const BackwardCase& c);

/// The check of gradients against central finite differences of a scalar loss: see
/// check_finite_differences.
struct FiniteDifferenceVerdict {
  bool ok = false;
  std::string report;  ///< one line per perturbed element: tensor, index, gradient, difference
};

/// Checks the gradients of L = Σ w ∘ O (w random and fixed, passed to backward as dO) through
/// the runtime's forward and backward against central finite differences: `perturbed` elements
/// each of Q, K and V are moved by about ±step (to the nearest values the dtype holds; the
/// quotient takes the step actually made) and L is recomputed in float64 from the forward's O.
/// The inputs being fp16 or bf16, the step must be large (1 moves inputs of [-1, 1) by their
/// own size) for the loss's change to stand out of its rounding; its truncation error, O(step²)
/// times the softmax's third derivative, stays small at the default scale 1/sqrt(head_dim).
/// The tolerance follows from the dtype's unit roundoff u (2⁻¹¹ fp16, 2⁻⁸ bf16):
/// - each O element the perturbed input can move (its query row; or every row of the group's
///   heads that sees its key) is off by at most u · (|O| + max|V|) (its own rounding, and P's
///   in the forward's P V); taken as uniform and independent across elements and the two runs,
///   that is a standard deviation σ of L₊ − L₋, and the tolerance allows 4σ / (x₊ − x₋);
/// - the backward's own error: 4u times the largest element of that gradient (P and dS are
///   rounded to the dtype for the products, and the gradient is stored in it).
/// Meant for tiny shapes (a few rows of head dim 8 to 64): the noise grows with the rows a key
/// reaches. bf16 leaves about an order of magnitude less resolution than fp16.
FiniteDifferenceVerdict check_finite_differences(Runtime& runtime, const BackwardCase& c,
                                                 int perturbed = 3, double step = 1.0);

}  // namespace flashjit::testing
