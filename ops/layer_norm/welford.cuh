#pragma once
// A row's mean and variance in one pass (source document 000, appendix A): Welford's update
// adds one value to a running (count, mean, M2), M2 = Σ (x − μ)², and Chan's pairwise merge
// combines the statistics of two disjoint parts of the row,
//   n = n_A + n_B,  δ = μ_B − μ_A,  μ = μ_A + δ·n_B/n,  M2 = M2_A + M2_B + δ²·n_A·n_B/n,
// so each thread takes its columns and the threads of a row merge theirs. Unlike
// E[x²] − E[x]², neither step subtracts two large sums, so a row with a large mean keeps the
// digits of its variance.
#include "tile/numeric.cuh"

namespace flashjit {

struct WelfordStats {
  float count;  // n (exact in fp32 up to 2^24 values)
  float mean;   // μ
  float m2;     // M2 = Σ (x − μ)²
};

FJ_HOST_DEVICE WelfordStats empty_welford() { return {0.0f, 0.0f, 0.0f}; }

/// Welford's update: n' = n + 1, μ' = μ + (x − μ)/n', M2' = M2 + (x − μ)(x − μ').
FJ_HOST_DEVICE WelfordStats welford_push(WelfordStats stats, float x) {
  const float count = stats.count + 1.0f;
  const float delta = x - stats.mean;
  const float mean = stats.mean + delta / count;
  return {count, mean, fma_rn(delta, x - mean, stats.m2)};
}

/// Chan's merge of the statistics of two disjoint parts (an empty part changes nothing).
FJ_HOST_DEVICE WelfordStats chan_merge(WelfordStats a, WelfordStats b) {
  const float count = a.count + b.count;
  if (count == 0.0f) return a;  // both empty: no 0/0
  const float delta = b.mean - a.mean;
  const float b_share = b.count / count;  // n_B/n
  const float mean = fma_rn(delta, b_share, a.mean);
  const float m2 = a.m2 + b.m2 + delta * delta * a.count * b_share;
  return {count, mean, m2};
}

#if defined(FJ_DEVICE_CODE) || defined(FLASHJIT_EMULATOR)
/// Shuffle for warp_allreduce (found by argument-dependent lookup).
FJ_DEVICE WelfordStats shuffle_xor(WelfordStats stats, int lane_mask) {
  return {__shfl_xor_sync(0xffffffffu, stats.count, lane_mask),
          __shfl_xor_sync(0xffffffffu, stats.mean, lane_mask),
          __shfl_xor_sync(0xffffffffu, stats.m2, lane_mask)};
}

/// Lane `src_lane`'s statistics (every lane of the warp takes part).
FJ_DEVICE WelfordStats shuffle_from(WelfordStats stats, int src_lane) {
  return {__shfl_sync(0xffffffffu, stats.count, src_lane),
          __shfl_sync(0xffffffffu, stats.mean, src_lane),
          __shfl_sync(0xffffffffu, stats.m2, src_lane)};
}
#endif

}  // namespace flashjit
