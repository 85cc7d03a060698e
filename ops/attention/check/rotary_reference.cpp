#include "attention/check/rotary_reference.hpp"

#include <cmath>

namespace flashjit::reference {

RotaryTables rope_tables(std::int64_t positions, std::int64_t rotary_dim, double base) {
  RotaryTables t;
  t.positions = positions;
  t.pairs = rotary_dim / 2;
  for (std::int64_t p = 0; p < positions; ++p) {
    for (std::int64_t i = 0; i < t.pairs; ++i) {
      const double angle =
          static_cast<double>(p) *
          std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
      t.cos.push_back(static_cast<float>(std::cos(angle)));
      t.sin.push_back(static_cast<float>(std::sin(angle)));
    }
  }
  return t;
}

void rotate_row(View4 t, std::int64_t b, std::int64_t l, std::int64_t h, const RotaryTables& tables,
                std::int64_t position, bool interleaved) {
  for (std::int64_t i = 0; i < tables.pairs; ++i) {
    const std::int64_t first = interleaved ? 2 * i : i;
    const std::int64_t second = interleaved ? 2 * i + 1 : i + tables.pairs;
    const auto at = static_cast<std::size_t>(position * tables.pairs + i);
    const double cos = tables.cos[at], sin = tables.sin[at];
    const double x = t(b, l, h, first), y = t(b, l, h, second);
    t(b, l, h, first) = x * cos - y * sin;
    t(b, l, h, second) = y * cos + x * sin;
  }
}

}  // namespace flashjit::reference
