#pragma once
// Barriers beyond __syncthreads (sm_90a): mbarriers, the shared-memory objects a TMA load
// completes on and a producer/consumer pipeline waits on, and named barriers (bar.sync /
// bar.arrive with an id and a thread count) that synchronize a subset of the block, as
// FlashAttention-3's warpgroup pingpong does. An mbarrier is a 64-bit object in dynamic shared
// memory (8-byte aligned); its phase completes when every expected arrival is in and every
// announced transaction byte has landed, and waits name the phase by its parity. The
// emulator's twins check the protocol (emulator/mbarrier.cpp, named_barrier.cpp).
#include "tile/async_copy.cuh"

namespace flashjit {

/// An mbarrier object in shared memory (only its address matters).
using mbarrier_t = unsigned long long;

#if defined(FJ_DEVICE_CODE)

/// mbarrier.init: phase 0 expecting `count` arrivals per phase.
FJ_DEVICE void mbarrier_init(mbarrier_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count)
               : "memory");
}
/// Makes initialised barriers visible to the async proxy (then a __syncthreads for threads).
FJ_DEVICE void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/// mbarrier.inval: the barrier is dead (its memory may be reused or re-initialised).
FJ_DEVICE void mbarrier_inval(mbarrier_t* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(shared_address(bar)) : "memory");
}
/// One arrival on the current phase.
FJ_DEVICE void mbarrier_arrive(mbarrier_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
}
/// Announces `bytes` more transaction bytes for the current phase, then arrives.
FJ_DEVICE void mbarrier_arrive_expect_tx(mbarrier_t* bar, unsigned bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)),
      "r"(bytes)
      : "memory");
}
/// Announces `bytes` more transaction bytes for the current phase (no arrival).
FJ_DEVICE void mbarrier_expect_tx(mbarrier_t* bar, unsigned bytes) {
  asm volatile(
      "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)),
      "r"(bytes)
      : "memory");
}
/// Whether the phase with `parity` has completed (may suspend the thread for a while first).
FJ_DEVICE bool mbarrier_try_wait_parity(mbarrier_t* bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
/// Waits until the phase with `parity` has completed.
FJ_DEVICE void mbarrier_wait_parity(mbarrier_t* bar, unsigned parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}
/// bar.sync id, threads: waits until `threads` (a multiple of 32) threads arrived at `id`.
FJ_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// bar.arrive id, threads: counts this thread toward `id` without waiting.
FJ_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#else  // host twins: the emulator's model of the same instructions

inline void mbarrier_init(mbarrier_t* bar, unsigned count) { emulator::mbarrier_init(bar, count); }
inline void mbarrier_init_fence() {}  // the emulator's init is visible at once
inline void mbarrier_inval(mbarrier_t* bar) { emulator::mbarrier_inval(bar); }
inline void mbarrier_arrive(mbarrier_t* bar) { emulator::mbarrier_arrive(bar); }
inline void mbarrier_arrive_expect_tx(mbarrier_t* bar, unsigned bytes) {
  emulator::mbarrier_arrive_expect_tx(bar, bytes);
}
inline void mbarrier_expect_tx(mbarrier_t* bar, unsigned bytes) {
  emulator::mbarrier_expect_tx(bar, bytes);
}
inline bool mbarrier_try_wait_parity(mbarrier_t* bar, unsigned parity) {
  return emulator::mbarrier_try_wait_parity(bar, parity);
}
inline void mbarrier_wait_parity(mbarrier_t* bar, unsigned parity) {
  emulator::mbarrier_wait_parity(bar, parity);
}
inline void named_barrier_sync(int id, int threads) { emulator::named_barrier_sync(id, threads); }
inline void named_barrier_arrive(int id, int threads) {
  emulator::named_barrier_arrive(id, threads);
}

#endif

}  // namespace flashjit
