#pragma once
// Vector accesses to global and shared memory: W neighbouring elements of T moved by loads or
// stores of up to 16 bytes each (one access for W·sizeof(T) ≤ 16, else 16-byte pieces),
// widened to or narrowed from fp32 in registers. A
// warp's 16-byte accesses fill whole 32-byte sectors with a quarter of the requests 4-byte ones
// take and an eighth of 2-byte ones'. The address must be aligned to the access size, as on a
// GPU (the emulator reports one that is not).
#include "tile/memory.cuh"

namespace flashjit {

/// W elements of T as one access moves them.
template <typename T, int W>
struct alignas(W * sizeof(T)) Packed {
  static_assert(W * sizeof(T) <= 16 && (W & (W - 1)) == 0, "one access moves at most 16 bytes");
  T values[W];
};

/// Elements of T one access of a W-element vector moves: all W, or 16 bytes' worth.
template <typename T, int W>
constexpr int access_elements() {
  return W * sizeof(T) <= 16 ? W : int(16 / sizeof(T));
}

#if defined(FJ_DEVICE_CODE)

/// Elements [index, index + W) of global array `base`, widened to fp32.
template <int W, typename T>
FJ_DEVICE void load_global_vector(const T* base, index_t index, float (&out)[W]) {
  constexpr int kPiece = access_elements<T, W>();
#pragma unroll
  for (int first = 0; first < W; first += kPiece) {
    const Packed<T, kPiece> packed =
        *reinterpret_cast<const Packed<T, kPiece>*>(base + index + first);
#pragma unroll
    for (int i = 0; i < kPiece; ++i) out[first + i] = to_float(packed.values[i]);
  }
}

/// Narrows `in` to T and writes it to elements [index, index + W) of global array `base`.
template <int W, typename T>
FJ_DEVICE void store_global_vector(T* base, index_t index, const float (&in)[W]) {
  constexpr int kPiece = access_elements<T, W>();
#pragma unroll
  for (int first = 0; first < W; first += kPiece) {
    Packed<T, kPiece> packed;
#pragma unroll
    for (int i = 0; i < kPiece; ++i) packed.values[i] = from_float<T>(in[first + i]);
    *reinterpret_cast<Packed<T, kPiece>*>(base + index + first) = packed;
  }
}

/// Elements [index, index + W) of a shared array, widened to fp32.
template <int W, typename T>
FJ_DEVICE void load_shared_vector(const T* base, int index, float (&out)[W]) {
  load_global_vector(base, index, out);  // generic addressing: the compiler sees the window
}

/// Narrows `in` to T and writes it to elements [index, index + W) of a shared array.
template <int W, typename T>
FJ_DEVICE void store_shared_vector(T* base, int index, const float (&in)[W]) {
  store_global_vector(base, index, in);
}

#else  // host: the emulator checks each access as one request of W·sizeof(T) bytes

/// Reads W elements at `base + index` in accesses of access_elements, through `check`
/// (emulator::check_global or check_shared), widened to fp32; a rejected access reads zeros.
template <int W, typename T, class Check>
inline void load_vector_pieces(const T* base, long long index, float (&out)[W], Check check) {
  constexpr int kPiece = access_elements<T, W>();
  for (int first = 0; first < W; first += kPiece) {
    const T* address = emulator::element_address(base, index + first);
    const bool ok = check(address, kPiece * sizeof(T));
    for (int i = 0; i < kPiece; ++i) out[first + i] = ok ? to_float(address[i]) : 0.0f;
  }
}

/// Writes W elements narrowed to T at `base + index` in accesses of access_elements, through
/// `check`; a rejected access is skipped.
template <int W, typename T, class Check>
inline void store_vector_pieces(T* base, long long index, const float (&in)[W], Check check) {
  constexpr int kPiece = access_elements<T, W>();
  for (int first = 0; first < W; first += kPiece) {
    T* address = emulator::element_address(base, index + first);
    if (!check(address, kPiece * sizeof(T))) continue;
    for (int i = 0; i < kPiece; ++i) address[i] = from_float<T>(in[first + i]);
  }
}

template <int W, typename T>
inline void load_global_vector(const T* base, index_t index, float (&out)[W],
                               Site site = Site::current()) {
  load_vector_pieces(base, index, out, [&](const void* at, std::size_t bytes) {
    return emulator::check_global(at, bytes, false, site);
  });
}

template <int W, typename T>
inline void store_global_vector(T* base, index_t index, const float (&in)[W],
                                Site site = Site::current()) {
  store_vector_pieces(base, index, in, [&](const void* at, std::size_t bytes) {
    return emulator::check_global(at, bytes, true, site);
  });
}

template <int W, typename T>
inline void load_shared_vector(const T* base, int index, float (&out)[W],
                               Site site = Site::current()) {
  load_vector_pieces(base, index, out, [&](const void* at, std::size_t bytes) {
    return emulator::check_shared(at, bytes, false, site);
  });
}

template <int W, typename T>
inline void store_shared_vector(T* base, int index, const float (&in)[W],
                                Site site = Site::current()) {
  store_vector_pieces(base, index, in, [&](const void* at, std::size_t bytes) {
    return emulator::check_shared(at, bytes, true, site);
  });
}

#endif

}  // namespace flashjit
