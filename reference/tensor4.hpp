#pragma once
// Strided 4-D tensors of float64 for the references and the cases: logical order [batch,
// seqlen, heads, head_dim] in either memory layout, views over them, and seeded random data
// that names the same values on every standard library. Plain host code, every op's reference
// may use it.
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace flashjit::reference {

/// Logical extents of a 4-D tensor: {batch, seqlen, heads, head_dim}.
using Shape4 = std::array<int64_t, 4>;

/// Memory order of a 4-D tensor; the logical order is always [B, L, H, D].
enum class Layout {
  bshd,  ///< [batch, seqlen, heads, head_dim] in memory (head_dim fastest)
  bhsd,  ///< [batch, heads, seqlen, head_dim] in memory (head_dim fastest)
};

/// Strides in elements, in logical order [B, L, H, D], of a dense tensor stored in `layout`.
Shape4 dense_strides(const Shape4& shape, Layout layout);

/// A non-owning strided 4-D view, indexed as (batch, seq, head, dim). `T` is `double` for
/// outputs and `const double` for inputs; a mutable view converts to a const one.
template <class T>
struct BasicView4 {
  T* data = nullptr;
  Shape4 shape{};    ///< {batch, seqlen, heads, head_dim}
  Shape4 strides{};  ///< in elements, same order as shape

  /// The element at logical position (b, l, h, d); no bounds check.
  T& operator()(int64_t b, int64_t l, int64_t h, int64_t d) const {
    return data[b * strides[0] + l * strides[1] + h * strides[2] + d * strides[3]];
  }

  /// A mutable view converts implicitly to a read-only one.
  template <class U = T, std::enable_if_t<!std::is_const_v<U> && std::is_same_v<U, T>, int> = 0>
  operator BasicView4<const U>() const {
    return {data, shape, strides};
  }
};

using View4 = BasicView4<double>;             ///< writable strided view
using ConstView4 = BasicView4<const double>;  ///< read-only strided view

/// A dense owning tensor in either layout. Copies are deep and safe: views are made on demand,
/// so no pointer into `values` is stored.
struct Tensor4 {
  Shape4 shape{};  ///< logical {batch, seqlen, heads, head_dim}
  Layout layout = Layout::bshd;
  std::vector<double> values;  ///< dense storage in `layout` order

  View4 view() { return {values.data(), shape, dense_strides(shape, layout)}; }
  ConstView4 view() const { return {values.data(), shape, dense_strides(shape, layout)}; }
  double& operator()(int64_t b, int64_t l, int64_t h, int64_t d) { return view()(b, l, h, d); }
  double operator()(int64_t b, int64_t l, int64_t h, int64_t d) const { return view()(b, l, h, d); }
};

/// A zero-filled tensor of logical shape `shape` stored in `layout`.
Tensor4 zeros(const Shape4& shape, Layout layout);

/// A tensor of values uniform in [-1, 1) from a seeded, portable generator. Values are drawn in
/// logical order, so the same seed gives the same logical tensor in either layout.
Tensor4 random_tensor(const Shape4& shape, Layout layout, uint64_t seed);

/// A dense copy of `src` stored in `layout` (to compare results held in different layouts).
Tensor4 to_layout(ConstView4 src, Layout layout);

/// "{2, 16, 4, 64}", for error messages.
std::string shape_string(const Shape4& shape);

}  // namespace flashjit::reference
