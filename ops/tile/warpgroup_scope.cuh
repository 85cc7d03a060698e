#pragma once
// A thread's place among its CTA's warpgroups: four warps, 128 threads, whose wgmma products
// cover 64 rows (an m64 tile), 16 rows a warp. The kernels that work a warpgroup at a time ask
// it for their rows, their lane and their warpgroup's barrier instead of spelling the division
// out at each use.
#include "tile/mbarrier.cuh"
#include "tile/warp.cuh"

namespace flashjit {

struct WarpgroupScope {
  // Enumerators, not static data members: NVRTC would emit those as PTX globals.
  enum : int {
    kThreads = 128,
    kRows = 64,      // the rows of one warpgroup's m64 products
    kWarpRows = 16,  // a warp's share of them
  };
  int thread;  // counted from the first thread of the warpgroups taken together

  /// Which warpgroup.
  FJ_HOST_DEVICE constexpr int group() const { return thread / kThreads; }
  /// The thread's index within its warpgroup.
  FJ_HOST_DEVICE constexpr int index() const { return thread % kThreads; }
  /// Whether it is its warpgroup's first thread (the one that issues a warpgroup's single
  /// operations: a TMA store, an mbarrier arrival for the group).
  FJ_HOST_DEVICE constexpr bool leader() const { return index() == 0; }
  /// The thread's lane in its warp.
  FJ_HOST_DEVICE constexpr int lane() const { return thread % kWarpSize; }
  /// The warpgroup's first row in the block.
  FJ_HOST_DEVICE constexpr int row0() const { return group() * kRows; }
  /// The warp's first row in the block.
  FJ_HOST_DEVICE constexpr int warp_row0() const { return thread / kWarpSize * kWarpRows; }
  /// Waits for the warpgroup's 128 threads at named barrier `first_barrier` + group(): each
  /// warpgroup has its own, numbered from `first_barrier`.
  FJ_DEVICE void sync(int first_barrier) const {
    named_barrier_sync(first_barrier + group(), kThreads);
  }
};

}  // namespace flashjit
