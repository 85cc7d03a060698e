#pragma once
// How blocks and grids wait for each other.
//
// Global semaphores: how a block waits for its turn after other blocks and passes the turn on,
// so that their additions into one buffer happen in a fixed order (a deterministic backward's
// dQ sums). The waiter spins on an acquire load until the integer holds its turn; the holder
// adds to it with a release once its writes are complete. Blocks may wait only for blocks of
// lower linear index, which the GPU starts first (the emulator, running blocks in that order,
// reports any other wait as a deadlock).
// The sums these order are bulk reductions (tile/bulk_reduce.cuh), which write through the
// async proxy: both sides fence between the proxies (fence.proxy.async.global), and the holder
// releases only after bulk_wait_group (not .read) has completed its reductions, which the
// emulator checks.
//
// Programmatic dependent launch (sm_90 and later): a kernel the host launches to overlap the
// one before it in its stream (LaunchShape::overlap_previous) may start while that kernel still
// runs, so its launch and set-up hide behind that kernel's tail. Each of its threads then waits
// for the earlier kernel (griddepcontrol.wait) before touching any global memory: that kernel
// may still be writing what this one reads, or reading what this one writes. A kernel lets the
// next one start early with allow_next_grid(); until then the next one starts when this one's
// blocks exit. On earlier GPUs, and on launches that overlap nothing, both are no-ops; the
// emulator reports a global access before the wait in an overlapping launch.
#include "tile/platform.cuh"

namespace flashjit {

#if defined(FJ_DEVICE_CODE)

/// Spins until the integer at global `address` equals `value`; this thread's later accesses,
/// async-proxy ones included, see what the releasing thread wrote before its release.
FJ_DEVICE void semaphore_wait_equal(const int* address, int value) {
  int current = 0;
  do {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(current) : "l"(address) : "memory");
  } while (current != value);
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
/// Adds `value` to the integer at global `address` after this thread's earlier writes,
/// completed async-proxy ones included.
FJ_DEVICE void semaphore_release_add(int* address, int value) {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(address), "r"(value) : "memory");
}

/// Adds `value` to the integer at global `address` and returns what it held before: a release
/// of this thread's earlier writes and an acquire of the earlier arrivals' (the last of the
/// blocks that share a counter learns it is last, and sees what they wrote).
FJ_DEVICE int semaphore_arrive_add(int* address, int value) {
  int before = 0;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n"
               : "=r"(before)
               : "l"(address), "r"(value)
               : "memory");
  return before;
}
/// Orders this thread's global accesses before and after it for the whole GPU (fence.sc.gpu):
/// each writer's fence before its block's arrival, each reader's after the last one's.
FJ_DEVICE void global_fence() { __threadfence(); }

#else  // host twins: the emulator's model (emulator/semaphore.cpp); its proxies need no fence

inline void semaphore_wait_equal(const int* address, int value) {
  emulator::semaphore_wait_equal(address, value);
}
inline void semaphore_release_add(int* address, int value) {
  emulator::semaphore_release_add(address, value);
}
inline int semaphore_arrive_add(int* address, int value) {
  return emulator::semaphore_arrive_add(address, value);
}
/// Blocks run one at a time in linear order: their accesses are already ordered.
inline void global_fence() {}

#endif

/// griddepcontrol.wait: returns once the grids this launch depends on have completed and their
/// writes are visible. Call it in every thread before its first global access.
FJ_DEVICE void wait_for_previous_grid() {
#if defined(FJ_DEVICE_CODE)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
#elif defined(FLASHJIT_EMULATOR)
  emulator::grid_dependency_wait();
#endif
}

/// griddepcontrol.launch_dependents: the next grid in the stream, if it was launched to overlap
/// this one, may start its blocks now (they still wait for this grid's completion before they
/// touch memory). Call it once the rest of this kernel no longer needs the whole GPU.
FJ_DEVICE void allow_next_grid() {
#if defined(FJ_DEVICE_CODE)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
#elif defined(FLASHJIT_EMULATOR)
  emulator::launch_dependent_grids();
#endif
}

}  // namespace flashjit
