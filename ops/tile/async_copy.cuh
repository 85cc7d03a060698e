#pragma once
// cp.async: copies from global to shared memory that complete in the background, in commit
// groups a thread waits for. The emulator models the same groups: data lands only at the wait.
#include "tile/platform.cuh"

namespace flashjit {

#if defined(FJ_DEVICE_CODE)

/// The shared-window address of a generic pointer into shared memory (what ldmatrix and
/// cp.async take).
FJ_DEVICE unsigned shared_address(const void* pointer) {
  unsigned long long address;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(address) : "l"(pointer));
  return static_cast<unsigned>(address);
}

/// Starts copying 16 bytes from `global_src` to `shared_dst`, or zero-fills them when `valid`
/// is false (no global read happens then: src-size 0). Both 16-byte aligned. Bypasses L1.
FJ_DEVICE void cp_async_16(void* shared_dst, const void* global_src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(shared_dst)),
               "l"(global_src), "r"(valid ? 16 : 0));
}

/// Starts copying 4 bytes (an index) from `global_src` to `shared_dst`, or zero-fills them
/// when `valid` is false (no global read). Both 4-byte aligned; through L1 (.ca: the only form
/// of the small sizes).
FJ_DEVICE void cp_async_4(void* shared_dst, const void* global_src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(shared_address(shared_dst)),
               "l"(global_src), "r"(valid ? 4 : 0));
}

/// Closes the current group of cp.async copies.
FJ_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::); }

/// Waits until at most `Pending` of this thread's newest groups are still in flight.
template <int Pending>
FJ_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

#else  // host twins: the emulator's model of the same instructions

inline void cp_async_16(void* shared_dst, const void* global_src, bool valid,
                        std::source_location site = std::source_location::current()) {
  emulator::cp_async(shared_dst, global_src, 16, valid ? 16 : 0, site);
}
inline void cp_async_4(void* shared_dst, const void* global_src, bool valid,
                       std::source_location site = std::source_location::current()) {
  emulator::cp_async(shared_dst, global_src, 4, valid ? 4 : 0, site);
}
inline void cp_async_commit() { emulator::cp_async_commit(); }
template <int Pending>
inline void cp_async_wait() {
  emulator::cp_async_wait(Pending);
}

#endif

}  // namespace flashjit
