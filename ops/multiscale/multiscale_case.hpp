#pragma once
// One multi-scale attention (retention) case end to end, for any backend: random inputs rounded
// to the kernel's dtype, a decay rate per head (RetNet's 1 − 2^(−5 − h)) or a random mask
// tensor, poisoned outputs, the forward (and backward) run, and the verdict against the float64
// reference. The bar is attention's (docs/design.md): each output's relative L2 error at
// most twice that of the same computation done plainly in the input dtype, every element
// written.
#include <cstdint>
#include <string>
#include <vector>

#include "flashjit/multiscale_attention.hpp"
#include "flashjit/runtime.hpp"
#include "multiscale/multiscale_reference.hpp"
#include "reference/checker.hpp"

namespace flashjit::testing {

struct MultiScaleCase {
  std::int64_t batch = 1, heads_q = 2, heads_kv = 2, seqlen_q = 64, seqlen_k = 64;
  std::int64_t head_dim = 64;
  MultiScaleMask mask = MultiScaleMask::decay;
  std::vector<double> gammas;  ///< decay rates per query head (empty: RetNet's 1 − 2^(−5 − h))
  float scale = 0.0f;          ///< MultiScaleAttention::scale (0: 1/sqrt(head_dim))
  bool backward = false;       ///< also run and judge the backward
  bool mask_gradient = false;  ///< tensor mask: ask for dM too
  DType dtype = DType::bf16;
  std::uint64_t seed = 1;

  /// "b1.hq2.hkv2.q64.k64.d64.bf16.decay.backward" for messages.
  std::string name() const;
  MultiScaleAttention attention() const;
  /// The float64 problem, with the case's rates or mask tensor.
  reference::MultiScaleProblem problem() const;
};

struct MultiScaleVerdict {
  bool ok = false;
  /// Per output checked (O, r; dQ, dK, dV, dM): its name and result at its bound.
  std::vector<std::pair<std::string, reference::CheckResult>> checks;
  std::vector<double> dmask;  ///< dM as written (runs compared bit for bit)
  std::string describe() const;
};

/// Runs `c` on `runtime` and judges every output.
MultiScaleVerdict run_multiscale_case(Runtime& runtime, const MultiScaleCase& c);

}  // namespace flashjit::testing
