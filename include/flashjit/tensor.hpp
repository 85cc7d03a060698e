#pragma once
// Non-owning views of tensors: pointer, dtype, shape and strides in elements, so that any
// layout (row-major, [B, L, H, D], [B, H, L, D], padded rows) is passed without copies.
#include <array>
#include <cstdint>
#include <initializer_list>

#include "flashjit/dtype.hpp"

namespace flashjit {

/// A strided view of up to four dimensions. Strides are in elements, not bytes.
struct TensorView {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> strides{};

  /// A row-major (contiguous) view of `shape`.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape);
  /// A view with explicit `shape` and `strides` (same length, at most kMaxRank).
  static TensorView strided(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                            std::initializer_list<std::int64_t> strides);

  /// Number of elements (product of the shape).
  std::int64_t numel() const;
  /// Bytes between the first and one past the last addressed element.
  std::int64_t span_bytes() const;
};

}  // namespace flashjit
