#pragma once
// One merge_states test case end to end, for any backend: an attention problem whose keys are
// split at random into disjoint ranges, each range's partial state (O, natural-log LSE) from
// the float64 reference rounded to the op's input dtypes, the merge run on the runtime into
// poisoned outputs, and the verdict against the float64 result of the unsplit problem.
#include <cstdint>
#include <string>
#include <vector>

#include "attention/check/attention_reference.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/runtime.hpp"
#include "reference/checker.hpp"

namespace flashjit::testing {

struct MergeStatesCase {
  reference::Problem problem;  ///< whose keys are split; tokens = batch · seqlen_q
  int partials = 2;            ///< key ranges (some may be empty)
  DType input = DType::f32;    ///< the partials' O
  DType output = DType::f32;   ///< the merged O
  std::uint64_t seed = 1;
  bool in_place = false;       ///< the two-way in-place form (2 partials, output == input)
  bool strided = false;        ///< padded rows, and every LSE stored heads-major
  bool empty_partial = false;  ///< partial 0 covers no key: LSE -inf on every row
  bool write_lse = true;       ///< ask for the merged LSE (the in-place form always writes it)

  /// "p4.t17.h2.d64.fp32to.bf16.strided..." for test messages.
  std::string name() const;
};

struct MergeStatesVerdict {
  bool ok = false;
  double bound = 0;  ///< the relative L2 bound O was held to
  std::vector<reference::KeyRange> splits;
  reference::CheckResult out;  ///< merged O against the unsplit float64 O
  reference::CheckResult lse;  ///< merged LSE against the unsplit float64 LSE
  std::string describe() const;
};

/// Runs `c` on `runtime` (host memory on the emulator, device memory on a GPU) and judges it.
/// The bound on O's relative L2 error is the float32 one: the rounding of the partials to the
/// input dtype and of the result to the output dtype, plus fp32 arithmetic on LSEs as large as
/// the problem's (each carries an absolute error of |LSE| · 2^-24, which the weights turn into
/// a relative one).
MergeStatesVerdict run_merge_states_case(Runtime& runtime, const MergeStatesCase& c);

}  // namespace flashjit::testing
