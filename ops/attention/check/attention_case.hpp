#pragma once
// One forward-attention test case end to end, for any backend: random inputs rounded to the
// kernel's dtype, poisoned outputs, the run, and the verdict against the float64 reference.
// The bar (docs/design.md): the kernel's relative L2 error is at most twice that of a
// plain attention computed in the input dtype, no output is left unwritten, nothing is NaN.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/check/attention_reference.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/runtime.hpp"
#include "reference/checker.hpp"

namespace flashjit::testing {

struct ForwardCase {
  reference::Problem problem;
  DType dtype = DType::bf16;
  reference::Layout layout = reference::Layout::bshd;
  std::uint64_t seed = 1;
  bool write_lse = true;
  /// When > 0, the float64 reference and the plain-dtype baseline cover only this many query
  /// rows, spread over the sequence (the first and last included), of up to three (batch,
  /// head) pairs (the first, one in the middle, the last): at real sizes the full reference
  /// (16k x 16k x 128 per head, every head) takes far longer on the CPU than the kernel on
  /// the GPU. Every element of O and of LSE is still checked for having been written.
  /// 0: every row of every head.
  std::int64_t sample_rows = 0;
  /// Attention::captures, already in the runtime's memory (the problem's modifiers read host
  /// copies of the same values).
  std::vector<Capture> captures = {};

  /// "b2.hq8.hkv1.q17.k63.d64.bf16.bshd.causal..." for test messages.
  std::string name() const;
  /// The library's descriptor of the same problem.
  Attention attention() const;
};

struct ForwardVerdict {
  bool ok = false;
  double error = 0;            ///< the kernel's relative L2 error of O
  double plain_error = 0;      ///< that of a plain attention in the input dtype
  reference::CheckResult out;  ///< O against the reference, at tolerance 2 · plain_error
  reference::CheckResult lse;  ///< LSE against the reference
  std::string describe() const;
};

/// Runs `c` on `runtime` (host memory on the emulator, device memory on a GPU) with `config`,
/// or the runtime's own choice when none is given, and judges the result.
ForwardVerdict run_forward_case(Runtime& runtime, const ForwardCase& c,
                                const std::optional<kernels::ForwardConfig>& config = {});

/// A case's inputs and reference, computed once: run() judges any number of runs of the case
/// (each config of a sweep, say) against them, so that a sweep costs one reference.
class ForwardCaseRunner {
 public:
  explicit ForwardCaseRunner(const ForwardCase& c);
  ~ForwardCaseRunner();
  ForwardCaseRunner(ForwardCaseRunner&&) noexcept;
  ForwardCaseRunner& operator=(ForwardCaseRunner&&) noexcept;

  /// As run_forward_case(runtime, c, config).
  ForwardVerdict run(Runtime& runtime,
                     const std::optional<kernels::ForwardConfig>& config = {}) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The relative L2 error against the float64 reference of attention computed the plain way in
/// `dtype`: S, P = softmax(S) and O = P V each rounded to `dtype` (sums exact).
double plain_attention_error(const ForwardCase& c);

}  // namespace flashjit::testing
