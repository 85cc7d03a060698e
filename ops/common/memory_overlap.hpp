#pragma once
// Whether two strided views share memory, decided by elements rather than address ranges, so
// that interleaved views that never touch the same element (dQ, dK and dV as slices of one
// packed [B, L, 3, H, D] buffer; O beside Q in one buffer) are told apart from real aliasing.
#include "flashjit/tensor.hpp"

namespace flashjit::kernels {

/// The answer of shared_memory().
enum class Sharing {
  none,      ///< no byte of an element of one view is a byte of an element of the other
  some,      ///< an element of one overlaps an element of the other
  unproven,  ///< the address ranges meet and the search gave up (see shared_memory): treat as some
};

/// Whether an element of `a` and an element of `b` overlap (their byte ranges meet). Exact for
/// every pair of views whose strides, taken together, nest (each stride at least the extent of
/// the smaller ones, or equal to one of the other view: the layouts frameworks produce); for
/// other pairs the bounded search may stop at `unproven`. Both views must have passed
/// check_tensor (sizes >= 1, strides >= 0, extents within 64 bits).
Sharing shared_memory(const TensorView& a, const TensorView& b);

}  // namespace flashjit::kernels
