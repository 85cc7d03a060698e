#pragma once
// The shared-memory swizzle of Hopper's TMA and wgmma: one pattern for both, so that a tile TMA
// writes is the tile wgmma reads. Within every 8 rows of `span` bytes, the 16-byte chunk index
// (address bits [4, 4 + log2(span / 16))) is XORed with the row (address bits [7, ...)):
// CUtensorMapSwizzle's 32B, 64B and 128B modes, CuTe's Swizzle<1..3, 4, 3>.
#include <cstdint>

namespace flashjit::emulator::detail {

/// `address` (a shared offset, or one within a 1024-byte-aligned tile) swizzled over rows of
/// `span` bytes: 32, 64 or 128; 16 or 0 leave it as it is (no swizzle).
constexpr std::uint32_t swizzle_address(std::uint32_t address, std::uint32_t span) {
  const std::uint32_t mask = span > 16 ? span / 16 - 1 : 0;
  return address ^ ((address >> 7 & mask) << 4);
}

}  // namespace flashjit::emulator::detail
