#pragma once
// The online softmax statistics of a row (docs/design.md): the running max m and the
// running sum ℓ of 2^(x − m), updated one value at a time and merged across threads, so a row
// is read once to get both. Values arrive already multiplied by scale·log2(e).
#include "tile/numeric.cuh"

namespace flashjit {

struct RowStats {
  float max;  // m
  float sum;  // ℓ = Σ 2^(x − m)
};

FJ_HOST_DEVICE RowStats empty_row_stats() { return {negative_infinity(), 0.0f}; }

/// 2^(from − to), the factor that rescales a sum taken relative to max `from` to max `to`.
/// A side that has seen only -inf has sum 0, and its -inf − -inf = NaN must not leak: its
/// factor is defined as 0.
FJ_HOST_DEVICE float rescale(float from, float to) {
  return from == negative_infinity() ? 0.0f : exp2_approx(from - to);
}

/// m' = max(m, x);  ℓ' = ℓ·2^(m − m') + 2^(x − m')
FJ_HOST_DEVICE RowStats push(RowStats stats, float x) {
  float new_max = stats.max > x ? stats.max : x;
  return {new_max, stats.sum * rescale(stats.max, new_max) + rescale(x, new_max)};
}

/// The statistics of the union of two disjoint parts of a row.
FJ_HOST_DEVICE RowStats merge(RowStats a, RowStats b) {
  float new_max = a.max > b.max ? a.max : b.max;
  return {new_max, a.sum * rescale(a.max, new_max) + b.sum * rescale(b.max, new_max)};
}

/// 1/ℓ, or 0 for a row that has seen only -inf (its outputs are defined as 0).
FJ_HOST_DEVICE float inverse_sum(float sum) { return sum > 0.0f ? 1.0f / sum : 0.0f; }
FJ_HOST_DEVICE float inverse_sum(RowStats stats) { return inverse_sum(stats.sum); }

/// The softmax of one value x of the row: 2^(x − m) / ℓ.
FJ_HOST_DEVICE float probability(float x, RowStats stats, float inv_sum) {
  return rescale(x, stats.max) * inv_sum;
}

#if defined(FJ_DEVICE_CODE) || defined(FLASHJIT_EMULATOR)
/// Shuffle for warp_allreduce (found by argument-dependent lookup); the emulator provides the
/// same __shfl_xor_sync on the host.
FJ_DEVICE RowStats shuffle_xor(RowStats stats, int lane_mask) {
  return {__shfl_xor_sync(0xffffffffu, stats.max, lane_mask),
          __shfl_xor_sync(0xffffffffu, stats.sum, lane_mask)};
}
#endif

}  // namespace flashjit
