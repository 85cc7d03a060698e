// The emulator's tensor map: what cuTensorMapEncodeTiled is given, validated by the rules the
// CUDA Driver API documents for it ("Tensor Map Object Management"), and the
// swizzle TMA writes shared memory in (the CUtensorMapSwizzle modes: 16-byte chunk index ^=
// (address >> 7) & mask, mask 1, 3, 7 for 32B, 64B, 128B). The 64-byte alignment of the
// CUtensorMap object itself has no host counterpart.
// elementStrides (1 to 8 each): with stride s in dimension i >= 1 the box visits every s-th
// element, ceil(boxDim[i] / s) of them, packed densely in shared memory; without interleave
// (the only layout modelled) the hardware ignores elementStrides[0].
#include <cstdio>
#include <string>

#include "emulator/ptx_api.hpp"
#include "emulator/swizzle.hpp"

namespace flashjit::emulator {
namespace {

std::string field(const char* name, int i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

std::uint32_t swizzle_span(TmaSwizzle swizzle) {
  switch (swizzle) {
    case TmaSwizzle::none:
      return 0;
    case TmaSwizzle::b32:
      return 32;
    case TmaSwizzle::b64:
      return 64;
    case TmaSwizzle::b128:
      return 128;
  }
  return 0;
}

}  // namespace

std::string tensor_map_problem(const TensorMap& map) {
  const int e = map.element_bytes;
  if (e != 1 && e != 2 && e != 4 && e != 8) {
    return "tensorDataType: an element of " + std::to_string(e) + " bytes (1, 2, 4 or 8)";
  }
  if (map.rank < 1 || map.rank > 5) {
    return "tensorRank: " + std::to_string(map.rank) + " (1 to 5)";
  }
  const auto address = reinterpret_cast<std::uintptr_t>(map.global_address);
  if (address == 0 || address % 16 != 0) {
    char text[64];
    std::snprintf(text, sizeof text, "globalAddress: 0x%llx is not 16-byte aligned",
                  static_cast<unsigned long long>(address));
    return text;
  }
  for (int i = 0; i < map.rank; ++i) {
    const std::uint64_t dim = map.dims[static_cast<std::size_t>(i)];
    if (dim < 1 || dim > (std::uint64_t{1} << 32)) {
      return field("globalDim", i) + ": " + std::to_string(dim) + " (1 to 2^32)";
    }
  }
  for (int i = 1; i < map.rank; ++i) {
    const std::uint64_t stride = map.strides[static_cast<std::size_t>(i)];
    if (stride % 16 != 0 || stride >= (std::uint64_t{1} << 40)) {
      return field("globalStrides", i - 1) + ": " + std::to_string(stride) +
             " bytes (a multiple of 16, below 2^40)";
    }
  }
  for (int i = 0; i < map.rank; ++i) {
    const std::uint32_t box = map.box[static_cast<std::size_t>(i)];
    if (box < 1 || box > 256)
      return field("boxDim", i) + ": " + std::to_string(box) + " (1 to 256)";
  }
  const std::uint32_t inner = map.box[0] * static_cast<std::uint32_t>(e);
  if (inner % 16 != 0) {
    return "boxDim[0]: " + std::to_string(map.box[0]) + " elements of " + std::to_string(e) +
           " bytes = " + std::to_string(inner) + " bytes, not a multiple of 16";
  }
  for (int i = 0; i < map.rank; ++i) {
    const std::uint32_t stride = map.element_strides[static_cast<std::size_t>(i)];
    if (stride < 1 || stride > 8) {
      return field("elementStrides", i) + ": " + std::to_string(stride) + " (1 to 8)";
    }
  }
  const std::uint32_t span = swizzle_span(map.swizzle);
  if (span != 0 && inner > span) {
    return "swizzle: the inner box extent is " + std::to_string(inner) + " bytes, over the " +
           std::to_string(span) + "-byte swizzle span";
  }
  return "";
}

std::uint32_t tensor_map_box_elements(const TensorMap& map, int dimension) {
  const auto d = static_cast<std::size_t>(dimension);
  if (dimension == 0) return map.box[0];  // elementStrides[0] is ignored
  return (map.box[d] + map.element_strides[d] - 1) / map.element_strides[d];
}

std::uint32_t tensor_map_box_bytes(const TensorMap& map) {
  std::uint32_t bytes = static_cast<std::uint32_t>(map.element_bytes);
  for (int i = 0; i < map.rank; ++i) bytes *= tensor_map_box_elements(map, i);
  return bytes;
}

std::uint32_t tma_swizzled_offset(TmaSwizzle swizzle, std::uint32_t box_offset,
                                  std::uint32_t byte) {
  return detail::swizzle_address(box_offset + byte, swizzle_span(swizzle));
}

}  // namespace flashjit::emulator
