#pragma once
// Bulk reduce-add (sm_90a): one thread adds a contiguous run of fp32 values from shared memory
// into global memory, each element atomically, through the async proxy
// (cp.reduce.async.bulk...add.f32). This is how a Hopper backward accumulates its partial dQ
// without stalling the math warps on per-element atomics: they write the partial sums to shared
// memory, and one thread hands the whole run to the copy engine.
// The reductions join the thread's bulk groups (tile/tma.cuh: bulk_commit_group,
// bulk_wait_group). Rules the emulator checks: both addresses 16-byte aligned and the size a
// non-zero multiple of 16 bytes; generic writes to the source need fence_proxy_async() before
// the reduction, and the source stays unwritten until bulk_wait_group_read (or bulk_wait_group,
// both in tile/tma.cuh) covers the group; the block does not touch the destination until
// bulk_wait_group does.
#include "tile/tma.cuh"

namespace flashjit {

#if defined(FJ_DEVICE_CODE)

/// Adds the `bytes` / 4 floats at `shared_src` into those at `global_dst`, in this thread's
/// open bulk group.
FJ_DEVICE void bulk_reduce_add(float* global_dst, const float* shared_src, unsigned bytes) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
          global_dst),
      "r"(shared_address(shared_src)), "r"(bytes)
      : "memory");
}

#else  // host twins: the emulator's model of the same instructions

inline void bulk_reduce_add(float* global_dst, const float* shared_src, unsigned bytes) {
  emulator::bulk_reduce_add_f32(global_dst, shared_src, bytes);
}

#endif

}  // namespace flashjit
