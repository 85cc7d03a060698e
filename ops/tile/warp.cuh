#pragma once
// Reductions across the lanes of a warp with butterfly shuffles: after the call every lane
// holds the combination of all 32 lanes' values.
#include "tile/platform.cuh"

namespace flashjit {

constexpr int kWarpSize = 32;
constexpr unsigned kFullWarp = 0xffffffffu;

/// Lane `lane ^ lane_mask`'s value.
FJ_DEVICE float shuffle_xor(float value, int lane_mask) {
  return __shfl_xor_sync(kFullWarp, value, lane_mask);
}

/// Lane `src_lane`'s value (every lane of the warp takes part).
FJ_DEVICE int shuffle_from(int value, int src_lane) {
  return __shfl_sync(kFullWarp, value, src_lane);
}

/// Lane `src_lane`'s value (every lane of the warp takes part).
FJ_DEVICE float shuffle_from(float value, int src_lane) {
  return __shfl_sync(kFullWarp, value, src_lane);
}

/// Combines a value of type T across the warp with `combine(a, b)` (associative, commutative).
/// T is shuffled field by field through `shuffle_xor(T, lane_mask)` which the caller supplies
/// for composite types (found by argument-dependent lookup); float is above.
template <typename T, typename Combine>
FJ_DEVICE T warp_allreduce(T value, Combine combine) {
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask /= 2) {
    value = combine(value, shuffle_xor(value, lane_mask));
  }
  return value;
}

}  // namespace flashjit
