#include "reference/tensor4.hpp"

#include <stdexcept>

namespace flashjit::reference {
namespace {

// splitmix64: tiny, portable and deterministic on every standard library, unlike
// std::uniform_real_distribution, so a seed names the same data everywhere.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::string shape_string(const Shape4& shape) {
  // Appended piece by piece: GCC 12 warns -Wrestrict (a false positive, GCC bug 105329) on
  // "literal" + std::to_string(...) at -O2 and above.
  std::string text = "{";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) text += ", ";
    text += std::to_string(shape[d]);
  }
  text += "}";
  return text;
}

Shape4 dense_strides(const Shape4& shape, Layout layout) {
  const int64_t dim = shape[3];
  if (layout == Layout::bshd) return {shape[1] * shape[2] * dim, shape[2] * dim, dim, 1};
  return {shape[2] * shape[1] * dim, dim, shape[1] * dim, 1};  // bhsd
}

Tensor4 zeros(const Shape4& shape, Layout layout) {
  for (int64_t extent : shape) {
    if (extent < 0) {
      throw std::invalid_argument("flashjit::reference: negative extent in " +
                                  shape_string(shape));
    }
  }
  const auto count = static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]);
  return Tensor4{shape, layout, std::vector<double>(count, 0.0)};
}

Tensor4 random_tensor(const Shape4& shape, Layout layout, uint64_t seed) {
  Tensor4 t = zeros(shape, layout);
  uint64_t state = seed;
  const View4 view = t.view();
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t l = 0; l < shape[1]; ++l)
      for (int64_t h = 0; h < shape[2]; ++h)
        for (int64_t d = 0; d < shape[3]; ++d) {
          const double unit = static_cast<double>(next_random(state) >> 11) * 0x1.0p-53;
          view(b, l, h, d) = 2.0 * unit - 1.0;  // [0, 1) -> [-1, 1)
        }
  return t;
}

Tensor4 to_layout(ConstView4 src, Layout layout) {
  Tensor4 t = zeros(src.shape, layout);
  const View4 dst = t.view();
  for (int64_t b = 0; b < src.shape[0]; ++b)
    for (int64_t l = 0; l < src.shape[1]; ++l)
      for (int64_t h = 0; h < src.shape[2]; ++h)
        for (int64_t d = 0; d < src.shape[3]; ++d) dst(b, l, h, d) = src(b, l, h, d);
  return t;
}

}  // namespace flashjit::reference
