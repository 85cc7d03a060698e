#pragma once
// One softmax case end to end, for any backend: rows of normal(0, 3) values in the dtype, a row
// stride 3 elements longer than a row (so the kernel must honour it), Runtime::softmax with a
// scale, and the verdict against the float64 softmax of the same rounded inputs.
#include <cstdint>
#include <string>

#include "flashjit/dtype.hpp"
#include "flashjit/runtime.hpp"
#include "reference/checker.hpp"

namespace flashjit::testing {

struct SoftmaxCase {
  std::int64_t rows = 9;
  std::int64_t cols = 1024;
  DType dtype = DType::bf16;
  float scale = 0.7f;

  /// "rows9.cols1024.bf16" for messages.
  std::string name() const;
};

struct SoftmaxVerdict {
  bool ok = false;
  double tolerance = 0;      ///< the relative L2 bound y was held to
  reference::CheckResult y;  ///< y against the float64 softmax
  std::string describe() const { return y.describe(); }
};

/// Runs `c` on `runtime` (host memory on the emulator, device memory on a GPU) and judges it:
/// y's relative L2 error at most 8e-3 in bf16, 1e-3 in fp16, 1e-5 in fp32 (a few units of the
/// dtype's rounding of y, which dominates).
SoftmaxVerdict run_softmax_case(Runtime& runtime, const SoftmaxCase& c);

}  // namespace flashjit::testing
