#pragma once
// Random test inputs, the same on every run for a seed.
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "flashjit/dtype.hpp"

namespace flashjit::testing {

/// bf16 bits of `count` values drawn from N(mean, 1).
inline std::vector<std::uint16_t> random_bf16(std::size_t count, std::uint64_t seed,
                                              float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(mean, 1.0f);
  std::vector<std::uint16_t> bits(count);
  for (std::uint16_t& b : bits) b = bf16_bits_from_float(normal(rng));
  return bits;
}

}  // namespace flashjit::testing
