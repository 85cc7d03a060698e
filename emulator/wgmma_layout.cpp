// wgmma's shared-memory matrix descriptors and the canonical operand layouts they describe.
// Bit fields from the PTX ISA, "Matrix Descriptor Format" (and CUTLASS GmmaDescriptor,
// cute/arch/mma_sm90_desc.hpp). Layouts from CUTLASS's comments in make_gmma_desc
// (cute/atom/mma_traits_sm90_gmma.hpp), in elements of 16 bits, T = 8 elements = 16 bytes,
// W = the swizzle row in 16-byte chunks (none 1, 32B 2, 64B 4, 128B 8):
//   K-major  none:     ((8,m),(T,2)) : ((1T,SBO),(1,LBO))
//   K-major  swizzled: ((8,m),(T,2)) : ((W·T,SBO),(1,T))       LBO unused
//   MN-major none:     ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
//   MN-major swizzled: ((T,W,m),(8,k)) : ((1,T,LBO),(W·T,SBO))
// and the swizzle is applied to the byte address: Swizzle<log2 W, 4, 3>, i.e. address bits
// [4, 4 + log2 W) ^= bits [7, 7 + log2 W) (cute/pointer_swizzle.hpp).
#include "emulator/ptx_api.hpp"
#include "emulator/swizzle.hpp"

namespace flashjit::emulator {
namespace {

constexpr std::uint64_t kFieldMask = 0x3FFF;  // 14 bits of address >> 4

// Swizzle row width in 16-byte chunks.
constexpr std::uint32_t row_chunks(WgmmaSwizzle swizzle) {
  switch (swizzle) {
    case WgmmaSwizzle::b32:
      return 2;
    case WgmmaSwizzle::b64:
      return 4;
    case WgmmaSwizzle::b128:
      return 8;
    case WgmmaSwizzle::none:
      return 1;
  }
  return 1;
}

}  // namespace

WgmmaDescriptor decode_wgmma_descriptor(std::uint64_t bits) {
  WgmmaDescriptor d;
  d.start = static_cast<std::uint32_t>(bits & kFieldMask) << 4;
  d.leading = static_cast<std::uint32_t>(bits >> 16 & kFieldMask) << 4;
  d.stride = static_cast<std::uint32_t>(bits >> 32 & kFieldMask) << 4;
  d.base_offset = static_cast<int>(bits >> 49 & 7);
  d.swizzle = static_cast<WgmmaSwizzle>(bits >> 62 & 3);
  return d;
}

std::uint64_t encode_wgmma_descriptor(const WgmmaDescriptor& d) {
  return (std::uint64_t{d.start} >> 4 & kFieldMask) |
         (std::uint64_t{d.leading} >> 4 & kFieldMask) << 16 |
         (std::uint64_t{d.stride} >> 4 & kFieldMask) << 32 |
         (static_cast<std::uint64_t>(d.base_offset) & 7) << 49 |
         static_cast<std::uint64_t>(d.swizzle) << 62;
}

std::uint32_t wgmma_operand_offset(const WgmmaDescriptor& d, bool mn_major, int mn, int k) {
  const auto r = static_cast<std::uint32_t>(mn), c = static_cast<std::uint32_t>(k);
  const std::uint32_t w = row_chunks(d.swizzle);
  std::uint32_t offset = 0;
  if (!mn_major && d.swizzle == WgmmaSwizzle::none) {
    offset = r % 8 * 16 + r / 8 * d.stride + c % 8 * 2 + c / 8 * d.leading;
  } else if (!mn_major) {
    offset = r % 8 * 16 * w + r / 8 * d.stride + c * 2;
  } else if (d.swizzle == WgmmaSwizzle::none) {
    offset = r % 8 * 2 + r / 8 * d.stride + c % 8 * 16 + c / 8 * d.leading;
  } else {
    offset =
        r % 8 * 2 + r / 8 % w * 16 + r / (8 * w) * d.leading + c % 8 * 16 * w + c / 8 * d.stride;
  }
  return detail::swizzle_address(d.start + offset, 16 * row_chunks(d.swizzle));
}

const char* wgmma_descriptor_problem(const WgmmaDescriptor& d, bool mn_major) {
  if (d.base_offset != 0) {
    return "a non-zero base offset (a swizzle pattern not starting on its atom) is not modelled";
  }
  if (d.swizzle == WgmmaSwizzle::none) return nullptr;
  const std::uint32_t row_bytes = 16 * row_chunks(d.swizzle), atom_bytes = 8 * row_bytes;
  if (d.start % atom_bytes >= row_bytes) {
    return "the start address lies past the first row of its swizzle atom (needs a base offset)";
  }
  if (!mn_major && d.start % row_bytes + 32 > row_bytes) {
    return "the k16 slice of a K-major row runs past the end of its swizzle row";
  }
  return nullptr;
}

}  // namespace flashjit::emulator
