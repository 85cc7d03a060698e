#pragma once
// The unit roundoff of the dtype a case stores a tensor in (half the gap between 1 and the next
// value): the u of the error bounds every op's verdict is built from.
#include <cmath>

#include "flashjit/dtype.hpp"

namespace flashjit::testing {

/// 2^-11 for fp16, 2^-8 for bf16, 2^-24 for fp32.
inline double unit_roundoff(DType dtype) {
  return dtype == DType::f16    ? std::ldexp(1.0, -11)
         : dtype == DType::bf16 ? std::ldexp(1.0, -8)
                                : std::ldexp(1.0, -24);
}

}  // namespace flashjit::testing
