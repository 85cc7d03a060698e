#pragma once
// Element access to global and shared memory. Every kernel reads and writes memory only
// through these, so the emulator can check each access against the buffers a launch
// registered and the shared-memory size it asked for.
#include "tile/numeric.cuh"

namespace flashjit {

#if defined(FJ_DEVICE_CODE)

/// Reads element `index` of global array `base` and widens it to fp32.
template <typename T>
FJ_DEVICE float load_global(const T* base, index_t index) {
  return to_float(base[index]);
}

/// Narrows `value` to T and writes it to element `index` of global array `base`.
template <typename T>
FJ_DEVICE void store_global(T* base, index_t index, float value) {
  base[index] = from_float<T>(value);
}

/// Writes `value` to global `address` unconverted (a whole 16-byte chunk, say).
template <typename T>
FJ_DEVICE void store_global_raw(T* address, T value) {
  *address = value;
}

/// Reads element `index` of a global int32 index array (sequence offsets, a page table).
FJ_DEVICE int load_global_index(const int* base, index_t index) { return base[index]; }

/// Lowers the global 64-bit `*address` to `value` if that is smaller, atomically.
FJ_DEVICE void atomic_min_global(unsigned long long* address, unsigned long long value) {
  atomicMin(address, value);
}

/// Adds `value` to element `index` of global fp32 array `base` atomically (other blocks add to
/// the same elements; the order of their additions is not fixed).
FJ_DEVICE void atomic_add_global(float* base, index_t index, float value) {
  atomicAdd(base + index, value);
}

/// Adds `first` and `second` to elements `index` and `index + 1` of global fp32 array `base`
/// with one 8-byte reduction (sm_90: red.global.add.v2.f32; `index` even, `base` 8-byte
/// aligned), atomically per element.
FJ_DEVICE void atomic_add_global_pair(float* base, index_t index, float first, float second) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(base + index), "f"(first),
               "f"(second)
               : "memory");
}

/// The block's dynamic shared memory viewed as an array of T (the only shared memory kernels
/// use: its size is a launch parameter the host computes from the config).
template <typename T>
FJ_DEVICE T* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char flashjit_dynamic_shared[];
  return reinterpret_cast<T*>(flashjit_dynamic_shared);
}

/// Reads element `index` of a shared-memory array.
template <typename T>
FJ_DEVICE T load_shared(const T* base, int index) {
  return base[index];
}

/// Writes element `index` of a shared-memory array.
template <typename T>
FJ_DEVICE void store_shared(T* base, int index, T value) {
  base[index] = value;
}

/// Reads elements `index` and `index + 1` of a shared fp32 array in one 8-byte load (`index`
/// even, `base` 8-byte aligned).
FJ_DEVICE void load_shared_pair(const float* base, int index, float& first, float& second) {
  const float2 pair = *reinterpret_cast<const float2*>(base + index);
  first = pair.x;
  second = pair.y;
}

/// Writes elements `index` and `index + 1` of a shared fp32 array in one 8-byte store (`index`
/// even, `base` 8-byte aligned).
FJ_DEVICE void store_shared_pair(float* base, int index, float first, float second) {
  *reinterpret_cast<float2*>(base + index) = make_float2(first, second);
}

#else  // host: the emulator checks every access; one it rejects is reported and skipped

// The caller's line: the instruction site the emulator's memory model reports an access under.
using Site = std::source_location;

/// Reads element `index` of global array `base` (checked against the launch's buffers).
template <typename T>
inline float load_global(const T* base, index_t index, Site site = Site::current()) {
  const T* address = emulator::element_address(base, index);
  return emulator::check_global(address, sizeof(T), false, site) ? to_float(*address) : 0.0f;
}

/// Writes element `index` of global array `base` (checked against the launch's buffers; the
/// fp32 value, before narrowing loses its bits, for a wgmma accumulator read before its wait).
template <typename T>
inline void store_global(T* base, index_t index, float value, Site site = Site::current()) {
  T* address = emulator::element_address(base, index);
  if (!emulator::check_global(address, sizeof(T), true, site)) return;
  emulator::check_stored_value(address, &value, sizeof value);
  *address = from_float<T>(value);
}

/// Writes `value` to global `address` unconverted (checked against the launch's buffers).
template <typename T>
inline void store_global_raw(T* address, T value, Site site = Site::current()) {
  if (!emulator::check_global(address, sizeof(T), true, site)) return;
  emulator::check_stored_value(address, &value, sizeof(T));
  *address = value;
}

/// Lowers `*address` to `value` if that is smaller (checked against the launch's buffers; one
/// block runs at a time, so the read-modify-write is atomic).
inline void atomic_min_global(unsigned long long* address, unsigned long long value,
                              Site site = Site::current()) {
  if (!emulator::check_global(address, sizeof(value), true, site)) return;
  emulator::check_stored_value(address, &value, sizeof value);
  if (value < *address) *address = value;
}

/// Reads element `index` of a global int32 index array (checked against the launch's buffers;
/// a rejected read gives 0).
inline int load_global_index(const int* base, index_t index, Site site = Site::current()) {
  const int* address = emulator::element_address(base, index);
  return emulator::check_global(address, sizeof(int), false, site) ? *address : 0;
}

/// Adds `value` to element `index` of global fp32 array `base` (checked against the launch's
/// buffers). The emulator runs one block at a time, so a plain read-modify-write is atomic.
inline void atomic_add_global(float* base, index_t index, float value,
                              Site site = Site::current()) {
  float* address = emulator::element_address(base, index);
  if (!emulator::check_global(address, sizeof(float), true, site)) return;
  emulator::check_stored_value(address, &value, sizeof value);
  *address += value;
}

/// Adds `first` and `second` to elements `index` and `index + 1` of global fp32 array `base`,
/// one 8-byte request to the memory model (atomic: the emulator runs one block at a time).
inline void atomic_add_global_pair(float* base, index_t index, float first, float second,
                                   Site site = Site::current()) {
  float* address = emulator::element_address(base, index);
  if (!emulator::check_global(address, 2 * sizeof(float), true, site)) return;
  const float pair[2] = {address[0] + first, address[1] + second};
  emulator::check_stored_value(address, pair, sizeof pair);
  std::memcpy(address, pair, sizeof pair);
}

/// The current block's dynamic shared memory, sized by the emulated launch.
template <typename T>
inline T* dynamic_shared() {
  return static_cast<T*>(emulator::shared_base());
}

/// Reads element `index` of a shared-memory array (checked for bounds and races).
template <typename T>
inline T load_shared(const T* base, int index, Site site = Site::current()) {
  const T* address = emulator::element_address(base, index);
  return emulator::check_shared(address, sizeof(T), false, site) ? *address : T{};
}

/// Writes element `index` of a shared-memory array (checked for bounds and races, and for a
/// wgmma accumulator read before its wait).
template <typename T>
inline void store_shared(T* base, int index, T value, Site site = Site::current()) {
  T* address = emulator::element_address(base, index);
  if (!emulator::check_shared(address, sizeof(T), true, site)) return;
  emulator::check_stored_value(address, &value, sizeof(T));
  *address = value;
}

/// Reads elements `index` and `index + 1` of a shared fp32 array in one 8-byte load, as the GPU
/// does (one request to the memory model).
inline void load_shared_pair(const float* base, int index, float& first, float& second,
                             Site site = Site::current()) {
  const float* address = emulator::element_address(base, index);
  const bool ok = emulator::check_shared(address, 2 * sizeof(float), false, site);
  first = ok ? address[0] : 0.0f;
  second = ok ? address[1] : 0.0f;
}

/// Writes elements `index` and `index + 1` of a shared fp32 array in one 8-byte store, as the
/// GPU does (one request to the memory model).
inline void store_shared_pair(float* base, int index, float first, float second,
                              Site site = Site::current()) {
  float* address = emulator::element_address(base, index);
  if (!emulator::check_shared(address, 2 * sizeof(float), true, site)) return;
  const float pair[2] = {first, second};
  emulator::check_stored_value(address, pair, sizeof pair);
  std::memcpy(address, pair, sizeof pair);
}

#endif

}  // namespace flashjit
