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

/// W elements of T as memory holds them, in 32-bit words (a lone 16-bit element in the low half
/// of one): a load made ahead of its use and widened to fp32 only there (widen), so the load is
/// waited for where the value is needed. Words, not 16-bit fields: the compiler kept a struct of
/// eight 16-bit elements in eight registers, words take four.
template <typename T, int W>
struct RawVector {
  static_assert(W * sizeof(T) <= 16 && (W & (W - 1)) == 0, "one access moves at most 16 bytes");
  static constexpr int kWords = int(W * sizeof(T) + 3) / 4;
#if defined(FJ_DEVICE_CODE)
  unsigned words[kWords];
#else
  unsigned words[kWords] = {};  // (a host compiler cannot tell which vectors a kernel fills)
  // The emulator's memory model counts the load in flight until widen uses it: its bytes, 0
  // once used. A copy carries the count; each load is widened once, from one of its copies.
  mutable unsigned held_bytes = 0;
#endif
};

/// The element `i` of `raw`.
template <typename T, int W>
FJ_DEVICE T raw_element(const RawVector<T, W>& raw, int i) {
  if constexpr (sizeof(T) == 4) {  // float
    return float_from_bits(raw.words[i]);
  } else {
    return T{static_cast<unsigned short>(raw.words[i / 2] >> (16 * (i % 2)))};
  }
}

/// `raw` widened to fp32.
template <typename T, int W>
FJ_DEVICE void widen(const RawVector<T, W>& raw, float (&out)[W]) {
#pragma unroll
  for (int i = 0; i < W; ++i) out[i] = to_float(raw_element(raw, i));
#if !defined(FJ_DEVICE_CODE)
  if (raw.held_bytes != 0) emulator::release_held_load(raw.held_bytes);
  raw.held_bytes = 0;
#endif
}

#if defined(FJ_DEVICE_CODE)

/// Elements [index, index + W) of global array `base` as memory holds them: one access.
template <typename T, int W>
FJ_DEVICE void load_global_raw(const T* base, index_t index, RawVector<T, W>& out) {
  constexpr int kWords = RawVector<T, W>::kWords;
  const T* address = base + index;
  if constexpr (W * sizeof(T) == 2) {
    out.words[0] = *reinterpret_cast<const unsigned short*>(address);
  } else if constexpr (kWords == 1) {
    out.words[0] = *reinterpret_cast<const unsigned*>(address);
  } else if constexpr (kWords == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(address);
    out.words[0] = v.x, out.words[1] = v.y;
  } else {
    const uint4 v = *reinterpret_cast<const uint4*>(address);
    out.words[0] = v.x, out.words[1] = v.y, out.words[2] = v.z, out.words[3] = v.w;
  }
}

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

/// N 32-bit words as one access moves them: CUDA's own vector types, whose stores the
/// compiler keeps whole (a struct with alignas of its own was split into 4-byte stores).
template <int N>
struct WordVector;
template <>
struct WordVector<1> {
  using type = unsigned;
  static FJ_DEVICE type of(const unsigned (&w)[1]) { return w[0]; }
};
template <>
struct WordVector<2> {
  using type = uint2;
  static FJ_DEVICE type of(const unsigned (&w)[2]) { return make_uint2(w[0], w[1]); }
};
template <>
struct WordVector<4> {
  using type = uint4;
  static FJ_DEVICE type of(const unsigned (&w)[4]) { return make_uint4(w[0], w[1], w[2], w[3]); }
};

/// `in[0, 4 / sizeof(T))` narrowed to T, packed into one 32-bit word (the lower element in the
/// lower half, as memory holds them).
template <typename T>
FJ_DEVICE unsigned pack_word(const float* in) {
  if constexpr (sizeof(T) == 4) {
    return float_bits(in[0]);
  } else {
    return unsigned(from_float<T>(in[0]).bits) | (unsigned(from_float<T>(in[1]).bits) << 16);
  }
}

/// One 16-byte store to global memory, spelled in PTX: the compiler split a uint4 store into
/// four 4-byte ones in loops it could not follow (the unbounded forward's y).
FJ_DEVICE void store_global_16(void* address, uint4 words) {
  asm volatile(
      "{\n.reg .u64 global_address;\ncvta.to.global.u64 global_address, %0;\n"
      "st.global.v4.b32 [global_address], {%1, %2, %3, %4};\n}\n" ::"l"(address),
      "r"(words.x), "r"(words.y), "r"(words.z), "r"(words.w)
      : "memory");
}

/// Narrows `in` to T and writes it to elements [index, index + W) of `base` (generic
/// addressing), packed into 32-bit words first: a struct of 2-byte elements is otherwise split
/// into 2-byte stores where the compiler cannot follow it. `to_global`: 16-byte pieces are
/// written with store_global_16.
template <bool to_global, int W, typename T>
FJ_DEVICE void store_vector_words(T* base, index_t index, const float (&in)[W]) {
  constexpr int kPiece = access_elements<T, W>();
  constexpr int kWords = kPiece * int(sizeof(T)) / 4;
#pragma unroll
  for (int first = 0; first < W; first += kPiece) {
    if constexpr (kWords == 0) {  // one 2-byte element
      base[index + first] = from_float<T>(in[first]);
    } else {
      unsigned words[kWords];
#pragma unroll
      for (int k = 0; k < kWords; ++k) words[k] = pack_word<T>(in + first + k * 4 / sizeof(T));
      using Vector = WordVector<kWords>;
      if constexpr (to_global && kWords == 4) {
        store_global_16(base + index + first, Vector::of(words));
      } else {
        *reinterpret_cast<typename Vector::type*>(base + index + first) = Vector::of(words);
      }
    }
  }
}

/// Narrows `in` to T and writes it to elements [index, index + W) of global array `base`.
template <int W, typename T>
FJ_DEVICE void store_global_vector(T* base, index_t index, const float (&in)[W]) {
  store_vector_words<true>(base, index, in);
}

/// Elements [index, index + W) of a shared array, widened to fp32.
template <int W, typename T>
FJ_DEVICE void load_shared_vector(const T* base, int index, float (&out)[W]) {
  load_global_vector(base, index, out);  // generic addressing: the compiler sees the window
}

/// Narrows `in` to T and writes it to elements [index, index + W) of a shared array.
template <int W, typename T>
FJ_DEVICE void store_shared_vector(T* base, int index, const float (&in)[W]) {
  store_vector_words<false>(base, index, in);  // the compiler keeps these whole
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

template <typename T, int W>
inline void load_global_raw(const T* base, index_t index, RawVector<T, W>& out,
                            Site site = Site::current()) {
  const T* address = emulator::element_address(base, index);
  // In flight until widen uses it, as the GPU waits for it only there.
  const bool ok = emulator::check_global_held_load(address, W * sizeof(T), site);
  for (unsigned& word : out.words) word = 0;
  out.held_bytes = ok ? unsigned(W * sizeof(T)) : 0u;
  if (ok) std::memcpy(out.words, address, W * sizeof(T));
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
