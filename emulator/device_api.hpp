#pragma once
// The CUDA names a template uses, defined for the host so the very source NVRTC compiles runs
// on the emulator (ops/tile/platform.cuh includes this when FLASHJIT_EMULATOR is set).
// Warp collectives are what they are on the GPU: every lane of the mask arrives, then each
// gets its result; the calling fiber waits in between.
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "emulator/dim3.hpp"
#include "emulator/ptx_api.hpp"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)

using dim3 = flashjit::emulator::Dim3;

/// The running fiber's indices and the launch's shape; the scheduler sets them on each switch.
extern flashjit::emulator::Dim3 threadIdx;
extern flashjit::emulator::Dim3 blockIdx;
extern flashjit::emulator::Dim3 blockDim;
extern flashjit::emulator::Dim3 gridDim;
constexpr int warpSize = 32;

namespace flashjit::emulator {

/// The warp collectives; all lanes of one call must use the same kind. `exchange` is the
/// generic one behind warp_exchange (mma.sync, ldmatrix).
enum class WarpOp { sync, shfl_idx, shfl_xor, shfl_down, shfl_up, ballot, exchange };

/// A warp collective whose lanes hand over more than 8 bytes each: every lane passes a pointer
/// to its own operands (and result slots); the last lane to arrive runs `compute` once over all
/// 32 lanes' pointers (nullptr for lanes outside the mask; the others wait suspended, so their
/// stacks stay valid). One static instance per instruction variant: lanes of one call must
/// pass the same instance, or the mismatch is reported.
struct WarpExchange {
  const char* name;                     // for findings, e.g. "mma.sync.m16n8k16.f16"
  void (*compute)(void* const* lanes);  // lanes[i]: lane i's pointer
};

/// A warpgroup collective (wgmma): the 128 threads of warps 4k..4k+3 each pass a pointer to
/// their operands; the last to arrive runs `compute` once over all 128 (index: thread - 128k;
/// the others wait suspended, so their stacks stay valid). As with WarpExchange, one static
/// instance per instruction: threads meeting with different instances are reported.
struct WarpgroupExchange {
  const char* name;                       // for findings, e.g. "wgmma.fence.sync.aligned"
  void (*compute)(void* const* threads);  // threads[i]: thread 128k + i's pointer
};

/// Waits for every thread of the block (__syncthreads).
void block_barrier();
/// The collective `op` over the lanes of `mask`: this lane contributes `value` and `operand`
/// (source lane, lane mask or delta; unused for sync/ballot) and gets its result.
std::uint64_t warp_collective(WarpOp op, unsigned mask, std::uint64_t value, int operand,
                              int width);
/// The exchange `kind` over the lanes of `mask`: this lane contributes `lane_data`; returns once
/// `kind.compute` has run over every lane's data. Outside a launch this throws std::logic_error.
void warp_exchange(unsigned mask, void* lane_data, const WarpExchange& kind);
/// The exchange `kind` over the running thread's warpgroup: returns once `kind.compute` has run
/// over all 128 threads' data. A thread of the group that never arrives is a deadlock.
void warpgroup_exchange(void* thread_data, const WarpgroupExchange& kind);
/// Tags the running thread's later findings with `where` (kept until the next call), so the
/// tile library's host twins can name the kernel line that made an access.
void set_source_location(std::source_location where = std::source_location::current());
/// The current block's dynamic shared memory.
void* shared_base();
/// Checks a global access; false when it must be skipped (out of bounds, now reported). `site`
/// is the instruction's line, for the memory model's report.
bool check_global(const void* address, std::size_t bytes, bool write,
                  std::source_location site = std::source_location::current());
/// check_global for a load whose value the thread waits for only where it uses it (the tile
/// library's RawVector, widened later): in the memory model it is in flight from here until
/// release_held_load, as a cp.async is until its wait, not only while it is its warp's latest.
bool check_global_held_load(const void* address, std::size_t bytes,
                            std::source_location site = std::source_location::current());
/// A held load of `bytes` was used (or dropped unused): no longer in flight.
void release_held_load(std::size_t bytes);
/// Checks a shared access for bounds and races; false when it must be skipped.
bool check_shared(const void* address, std::size_t bytes, bool write,
                  std::source_location site = std::source_location::current());
/// Reports a store of the `bytes` at `value` to `address` whose bits carry the mark of a wgmma
/// accumulator still in flight: a value read from it before its wgmma.wait_group.
void check_stored_value(const void* address, const void* value, std::size_t bytes);

/// `base + index` computed on integers, so an out-of-range index is reported rather than UB.
template <class T>
T* element_address(T* base, long long index) {
  return reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(base) +
                              static_cast<std::uintptr_t>(index) * sizeof(T));
}

/// A shuffled value's bits; shuffles move any trivially copyable value of up to 8 bytes.
template <class T>
std::uint64_t to_bits(T value) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of up to 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

/// The value back from its bits.
template <class T>
T from_bits(std::uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

}  // namespace flashjit::emulator

/// Block barrier.
inline void __syncthreads() { flashjit::emulator::block_barrier(); }
/// Warp barrier over `mask`.
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  flashjit::emulator::warp_collective(flashjit::emulator::WarpOp::sync, mask, 0, 0, warpSize);
}

/// `var` of lane `src_lane` (within this lane's group of `width`).
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
  using namespace flashjit::emulator;
  return from_bits<T>(warp_collective(WarpOp::shfl_idx, mask, to_bits(var), src_lane, width));
}
/// `var` of lane `lane ^ lane_mask`.
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
  using namespace flashjit::emulator;
  return from_bits<T>(warp_collective(WarpOp::shfl_xor, mask, to_bits(var), lane_mask, width));
}
/// `var` of lane `lane + delta`, or this lane's own past the group's end.
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  using namespace flashjit::emulator;
  return from_bits<T>(
      warp_collective(WarpOp::shfl_down, mask, to_bits(var), static_cast<int>(delta), width));
}
/// `var` of lane `lane - delta`, or this lane's own before the group's start.
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
  using namespace flashjit::emulator;
  return from_bits<T>(
      warp_collective(WarpOp::shfl_up, mask, to_bits(var), static_cast<int>(delta), width));
}
/// Bit i set when lane i of `mask` has a non-zero predicate.
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  using namespace flashjit::emulator;
  return static_cast<unsigned>(
      warp_collective(WarpOp::ballot, mask, predicate != 0 ? 1 : 0, 0, warpSize));
}
/// Non-zero when any lane of `mask` has a non-zero predicate.
inline int __any_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) != 0 ? 1 : 0;
}
/// Non-zero when every lane of `mask` has a non-zero predicate.
inline int __all_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) == mask ? 1 : 0;
}
