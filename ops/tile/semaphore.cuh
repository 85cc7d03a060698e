#pragma once
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

#else  // host twins: the emulator's model (emulator/semaphore.cpp); its proxies need no fence

inline void semaphore_wait_equal(const int* address, int value) {
  emulator::semaphore_wait_equal(address, value);
}
inline void semaphore_release_add(int* address, int value) {
  emulator::semaphore_release_add(address, value);
}

#endif

}  // namespace flashjit
