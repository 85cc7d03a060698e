#pragma once
// Probe kernels for the emulator-versus-hardware test (tests/gpu/test_primitives_gpu.cpp). Each
// runs one family of tile-library primitives on inputs read from global memory and writes every
// lane's raw results back, so that the same template, compiled by NVRTC for the GPU and by the
// host compiler for the emulator, can be compared word for word on the same inputs.
//
// Every probe is a template `probe<...>(const unsigned* in, unsigned* out)` (templates, so that
// the host compiler may see them in several translation units) on one block of kProbeThreads
// threads: thread t reads its words from in[t * in_words ...] and writes out[t * out_words ...]
// (the counts are given with each probe); the warps are independent, each on its own data.
#include "tile/ldmatrix.cuh"
#include "tile/memory.cuh"
#include "tile/mma.cuh"
#include "tile/shared_tile.cuh"
#include "tile/warp.cuh"

namespace flashjit::testing {

constexpr int kProbeWarps = 4;
constexpr int kProbeThreads = kProbeWarps * kWarpSize;

#if defined(FJ_DEVICE_CODE)
FJ_DEVICE unsigned word_of(float value) { return __float_as_uint(value); }
FJ_DEVICE float float_of(unsigned word) { return __uint_as_float(word); }
#else
inline unsigned word_of(float value) { return float_bits(value); }
inline float float_of(unsigned word) { return float_from_bits(word); }
#endif

/// Word `index` of `base` with its bits unchanged: the tile library reads global memory as fp32
/// or 16-bit values, and an fp32 load moves any bit pattern untouched (no arithmetic on it).
FJ_DEVICE unsigned load_word(const unsigned* base, index_t index) {
  return word_of(load_global(reinterpret_cast<const float*>(base), index));
}

FJ_DEVICE int probe_thread() { return static_cast<int>(threadIdx.x); }

// --- mma.sync m16n8k16 -------------------------------------------------------------------------

/// In: a.regs[4], b.regs[2], c[4] (fp32 bits) in the PTX fragment layout. Out: d[4].
constexpr int kMmaInWords = 10;
constexpr int kMmaOutWords = 4;

template <typename T>
FJ_GLOBAL void mma_probe(const unsigned* in, unsigned* out) {
  const index_t first = index_t{probe_thread()} * kMmaInWords;
  FragmentA a;
  FragmentB b;
  float c[4], d[4];
  for (int r = 0; r < 4; ++r) a.regs[r] = load_word(in, first + r);
  for (int r = 0; r < 2; ++r) b.regs[r] = load_word(in, first + 4 + r);
  for (int r = 0; r < 4; ++r) c[r] = float_of(load_word(in, first + 6 + r));
  mma_m16n8k16<T>(d, a, b, c);  // D = A B + C
  for (int r = 0; r < 4; ++r) {
    store_global_raw(out + probe_thread() * kMmaOutWords + r, word_of(d[r]));
  }
}

// --- ldmatrix ----------------------------------------------------------------------------------

/// Each warp's shared memory is a pool of kLdmatrixPoolRows 16-byte rows (eight 16-bit
/// elements); each lane picks the row it addresses, so arbitrary gathers are exercised.
constexpr int kLdmatrixPoolRows = 64;
constexpr int kLdmatrixPoolWords = kLdmatrixPoolRows * 4;  // per warp
constexpr int kLdmatrixSharedBytes = kProbeWarps * kLdmatrixPoolWords * 4;
/// In: 8 words of the warp's pool (lane-major slices), then the lane's row. Out: the four
/// registers of ldmatrix_x4, or of ldmatrix_x4_trans when Transpose.
constexpr int kLdmatrixInWords = 9;
constexpr int kLdmatrixOutWords = 4;

template <bool Transpose>
FJ_GLOBAL void ldmatrix_probe(const unsigned* in, unsigned* out) {
  const int thread = probe_thread(), lane = thread % kWarpSize, warp = thread / kWarpSize;
  const index_t first = index_t{thread} * kLdmatrixInWords;
  unsigned* pool = dynamic_shared<unsigned>() + warp * kLdmatrixPoolWords;  // (64 rows, 4 words)
  for (int w = 0; w < 8; ++w) store_shared(pool, lane * 8 + w, load_word(in, first + w));
  __syncwarp();
  const auto* rows = reinterpret_cast<const unsigned short*>(pool);  // (64 rows, 8 elements)
  const auto row = static_cast<int>(load_word(in, first + 8) % kLdmatrixPoolRows);
  unsigned regs[4];
  if constexpr (Transpose) {
    ldmatrix_x4_trans(regs, rows + row * 8);
  } else {
    ldmatrix_x4(regs, rows + row * 8);
  }
  for (int r = 0; r < 4; ++r) store_global_raw(out + thread * kLdmatrixOutWords + r, regs[r]);
}

// --- cp.async ----------------------------------------------------------------------------------

/// cp_async_probe<Chunks>: each thread copies Chunks 16-byte chunks in two commit groups (chunk
/// 0; the others), each valid or zero-filled by a flag, into shared slots that start as a
/// sentinel; one more slot is never a destination and must keep it. In: the chunks (4 words
/// each), then the flags word (bit i: chunk i valid) padded to 16 bytes, so that every
/// thread's chunks stay 16-byte aligned. Out: the Chunks + 1 slots after the copies.
constexpr int copy_in_words(int chunks) { return (chunks + 1) * 4; }
constexpr int copy_out_words(int chunks) { return (chunks + 1) * 4; }
constexpr int copy_shared_bytes(int chunks) { return (chunks + 1) * kProbeThreads * 16; }
constexpr unsigned kCopySentinel = 0xdeadbeefu;

/// Slot `slot` of `thread`: slot-major, so that neighbouring threads' chunks are neighbours as
/// in the tile loads.
FJ_DEVICE Chunk16* copy_slot(int slot, int thread) {
  return dynamic_shared<Chunk16>() + slot * kProbeThreads + thread;
}

FJ_DEVICE void store_slot(unsigned* out, int out_words, int slot, int thread) {
  const Chunk16 value = load_shared(copy_slot(slot, thread), 0);
  for (int w = 0; w < 4; ++w) {
    store_global_raw(out + thread * out_words + slot * 4 + w, value.words[w]);
  }
}

template <int Chunks>
FJ_GLOBAL void cp_async_probe(const unsigned* in, unsigned* out) {
  static_assert(Chunks >= 2, "one chunk in each of two commit groups at least");
  const int thread = probe_thread();
  const index_t first = index_t{thread} * copy_in_words(Chunks);
  const unsigned flags = load_word(in, first + Chunks * 4);
  const Chunk16 sentinel = {{kCopySentinel, kCopySentinel, kCopySentinel, kCopySentinel}};
  for (int slot = 0; slot <= Chunks; ++slot) store_shared(copy_slot(slot, thread), 0, sentinel);
  for (int chunk = 0; chunk < Chunks; ++chunk) {
    // An invalid chunk still passes a readable address, as the tile loads do: src-size 0
    // must keep the hardware from reading it at all.
    cp_async_16(copy_slot(chunk, thread), in + first + chunk * 4, ((flags >> chunk) & 1u) != 0);
    if (chunk == 0 || chunk == Chunks - 1) cp_async_commit();
  }
  cp_async_wait<1>();  // the first group has landed; the second may still be in flight
  store_slot(out, copy_out_words(Chunks), 0, thread);
  cp_async_wait<0>();
  for (int slot = 1; slot <= Chunks; ++slot) store_slot(out, copy_out_words(Chunks), slot, thread);
}

// --- pack2 -------------------------------------------------------------------------------------

/// In: kPackPairs (low, high) fp32 pairs. Out: pack2<T>(low, high) of each.
constexpr int kPackPairs = 8;
constexpr int kPackInWords = 2 * kPackPairs;
constexpr int kPackOutWords = kPackPairs;

template <typename T>
FJ_GLOBAL void pack2_probe(const unsigned* in, unsigned* out) {
  const int thread = probe_thread();
  for (int p = 0; p < kPackPairs; ++p) {
    const float low = float_of(load_word(in, index_t{thread} * kPackInWords + 2 * p));
    const float high = float_of(load_word(in, index_t{thread} * kPackInWords + 2 * p + 1));
    store_global_raw(out + thread * kPackOutWords + p, pack2<T>(low, high));
  }
}

// --- exp2, log2, tanh approximations -----------------------------------------------------------

enum class Approx { exp2, log2, tanh };

template <Approx F>
FJ_DEVICE float approximate(float x) {
  if constexpr (F == Approx::exp2) {
    return exp2_approx(x);
  } else if constexpr (F == Approx::log2) {
    return log2_approx(x);
  } else {
    return tanh_approx(x);
  }
}

/// In: kApproxValues arguments. Out: exp2_approx, log2_approx or tanh_approx of each.
constexpr int kApproxValues = 8;

template <Approx F>
FJ_GLOBAL void approx_probe(const unsigned* in, unsigned* out) {
  for (int i = 0; i < kApproxValues; ++i) {
    const index_t at = index_t{probe_thread()} * kApproxValues + i;
    store_global_raw(out + at, word_of(approximate<F>(float_of(load_word(in, at)))));
  }
}

// --- warp shuffles -----------------------------------------------------------------------------

/// In: raw bits, a finite fp32 value, a source lane, a predicate. Out: the tile library's
/// shuffle_xor of the bits for lane masks 1..16 (5 words), warp_allreduce sum and max of the
/// value, then within groups of Width lanes __shfl_sync from the source lane, __shfl_down_sync
/// by 3, __shfl_up_sync by 5 and __shfl_xor_sync by 1, and last __ballot_sync of the predicate.
constexpr int kShuffleInWords = 4;
constexpr int kShuffleOutWords = 12;

template <int Width>
FJ_GLOBAL void shuffle_probe(const unsigned* in, unsigned* out) {
  const int thread = probe_thread();
  const index_t first = index_t{thread} * kShuffleInWords;
  const unsigned bits = load_word(in, first);
  const float value = float_of(load_word(in, first + 1));
  const auto source = static_cast<int>(load_word(in, first + 2) % kWarpSize);
  const auto predicate = static_cast<int>(load_word(in, first + 3) & 1u);
  unsigned results[kShuffleOutWords];
  for (int i = 0; i < 5; ++i) results[i] = word_of(shuffle_xor(float_of(bits), 1 << i));
  results[5] = word_of(warp_allreduce(value, [](float a, float b) { return a + b; }));
  results[6] = word_of(warp_allreduce(value, [](float a, float b) { return a > b ? a : b; }));
  results[7] = __shfl_sync(kFullWarp, bits, source, Width);
  results[8] = __shfl_down_sync(kFullWarp, bits, 3, Width);
  results[9] = __shfl_up_sync(kFullWarp, bits, 5, Width);
  results[10] = __shfl_xor_sync(kFullWarp, bits, 1, Width);
  results[11] = __ballot_sync(kFullWarp, predicate);
  for (int i = 0; i < kShuffleOutWords; ++i) {
    store_global_raw(out + thread * kShuffleOutWords + i, results[i]);
  }
}

}  // namespace flashjit::testing
