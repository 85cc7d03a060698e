#pragma once
// wgmma (Hopper warpgroup MMA, sm_90a): D (64 x N, fp32) = A (64 x 16) · B (16 x N) (+ D),
// issued by the 128 threads of a warpgroup, asynchronously. A comes from shared memory through
// a matrix descriptor (SS) or from registers in the mma.sync A-fragment layout, warp w holding
// rows 16w..16w+15 (RS); B always from a descriptor. Accumulators: thread t, warp w = t / 32,
// lane l, register i of N / 2: row 16w + l/4 + 8·((i>>1)&1), column 8·(i>>2) + 2·(l%4) + (i&1).
// Protocol (PTX ISA): wgmma_fence() before the first wgmma and after registers they use were
// touched; wgmma_commit_group() after issuing; wgmma_wait_group<N>() before reading results or
// overwriting the shared operands. The emulator's twin checks all three (emulator/wgmma.cpp).
#include "tile/async_copy.cuh"
#include "tile/mma.cuh"

namespace flashjit {

/// The layout field (bits 62-63) of a matrix descriptor.
enum class WgmmaLayout : unsigned {
  interleave = 0,
  swizzle_128b = 1,
  swizzle_64b = 2,
  swizzle_32b = 3
};

/// A descriptor's bits: start address, leading (LBO) and stride (SBO) byte offsets, each
/// encoded as (x & 0x3FFFF) >> 4; base offset 0 (tiles start on their swizzle atom).
FJ_HOST_DEVICE constexpr unsigned long long wgmma_descriptor_bits(unsigned start,
                                                                  unsigned leading_bytes,
                                                                  unsigned stride_bytes,
                                                                  WgmmaLayout layout) {
  return static_cast<unsigned long long>((start & 0x3FFFFu) >> 4) |
         static_cast<unsigned long long>((leading_bytes & 0x3FFFFu) >> 4) << 16 |
         static_cast<unsigned long long>((stride_bytes & 0x3FFFFu) >> 4) << 32 |
         static_cast<unsigned long long>(layout) << 62;
}

/// The descriptor of the operand tile at `tile` in shared memory (16-byte aligned; swizzled
/// tiles on their atom: 256, 512 or 1024 bytes). K-major: LBO is the step to the next 8 k
/// (interleave only), SBO to the next 8 rows; MN-major: see HOPPER-NOTES 2.1.
FJ_DEVICE unsigned long long make_descriptor(const void* tile, unsigned leading_bytes,
                                             unsigned stride_bytes, WgmmaLayout layout) {
#if defined(FJ_DEVICE_CODE)
  const unsigned start = shared_address(tile);
#else  // the emulator's shared addresses start at the dynamic buffer
  const auto start = static_cast<unsigned>(static_cast<const char*>(tile) -
                                           static_cast<const char*>(emulator::shared_base()));
#endif
  return wgmma_descriptor_bits(start, leading_bytes, stride_bytes, layout);
}

/// Whether T is .f16 (else .bf16, the only other 16-bit input written here).
template <typename T>
constexpr bool kWgmmaF16 = false;
template <>
constexpr bool kWgmmaF16<half_t> = true;
template <typename T>
constexpr bool kWgmmaInput = kWgmmaF16<T>;
template <>
constexpr bool kWgmmaInput<bfloat16_t> = true;

/// N values the device PTX below is written for (any multiple of 8 up to 256 on the emulator).
template <int N>
constexpr bool kWgmmaDeviceN = N == 64 || N == 128;

#if defined(FJ_DEVICE_CODE)

FJ_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
FJ_DEVICE void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int Pending>
FJ_DEVICE void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

#define FJ_WGMMA_ACC4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
// m64n64k16: accumulators %0..%31; SS operands %32..%36, RS %32..%38.
#define FJ_WGMMA_D64                                                                       \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FJ_WGMMA_ACC64                                                                        \
  FJ_WGMMA_ACC4(0), FJ_WGMMA_ACC4(4), FJ_WGMMA_ACC4(8), FJ_WGMMA_ACC4(12), FJ_WGMMA_ACC4(16), \
      FJ_WGMMA_ACC4(20), FJ_WGMMA_ACC4(24), FJ_WGMMA_ACC4(28)
#define FJ_WGMMA_SS_SETP64 "setp.ne.b32 p, %34, 0;\n"
#define FJ_WGMMA_SS_OPERANDS64 ", %32, %33, p, 1, 1, %35, %36;\n"
#define FJ_WGMMA_RS_SETP64 "setp.ne.b32 p, %37, 0;\n"
#define FJ_WGMMA_RS_OPERANDS64 ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n"
// m64n128k16: accumulators %0..%63; SS operands %64..%68, RS %64..%70.
#define FJ_WGMMA_D128                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "  \
  "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "  \
  "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define FJ_WGMMA_ACC128                                                                       \
  FJ_WGMMA_ACC4(0), FJ_WGMMA_ACC4(4), FJ_WGMMA_ACC4(8), FJ_WGMMA_ACC4(12), FJ_WGMMA_ACC4(16), \
      FJ_WGMMA_ACC4(20), FJ_WGMMA_ACC4(24), FJ_WGMMA_ACC4(28), FJ_WGMMA_ACC4(32),             \
      FJ_WGMMA_ACC4(36), FJ_WGMMA_ACC4(40), FJ_WGMMA_ACC4(44), FJ_WGMMA_ACC4(48),             \
      FJ_WGMMA_ACC4(52), FJ_WGMMA_ACC4(56), FJ_WGMMA_ACC4(60)
#define FJ_WGMMA_SS_SETP128 "setp.ne.b32 p, %66, 0;\n"
#define FJ_WGMMA_SS_OPERANDS128 ", %64, %65, p, 1, 1, %67, %68;\n"
#define FJ_WGMMA_RS_SETP128 "setp.ne.b32 p, %69, 0;\n"
#define FJ_WGMMA_RS_OPERANDS128 ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n"

// SS: scale-d as a predicate set from a register; imm-scale-a/b fixed at 1.
#define FJ_WGMMA_SS_ASM(N, TYPE)                                               \
  asm volatile("{\n.reg .pred p;\n" FJ_WGMMA_SS_SETP##N                        \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE \
               " " FJ_WGMMA_D##N FJ_WGMMA_SS_OPERANDS##N "}\n"                 \
               : FJ_WGMMA_ACC##N                                               \
               : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(scale_d)),     \
                 "n"(static_cast<int>(TransA)), "n"(static_cast<int>(TransB)))
#define FJ_WGMMA_RS_ASM(N, TYPE)                                                              \
  asm volatile("{\n.reg .pred p;\n" FJ_WGMMA_RS_SETP##N                                       \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE                \
               " " FJ_WGMMA_D##N FJ_WGMMA_RS_OPERANDS##N "}\n"                                \
               : FJ_WGMMA_ACC##N                                                              \
               : "r"(a.regs[0]), "r"(a.regs[1]), "r"(a.regs[2]), "r"(a.regs[3]), "l"(b_desc), \
                 "r"(static_cast<int>(scale_d)), "n"(static_cast<int>(TransB)))

/// d (this thread's N / 2 accumulators) = A · B (+ d when scale_d), A and B from descriptors;
/// TransA / TransB: that operand is MN-major.
template <typename T, int N, bool TransA = false, bool TransB = false>
FJ_DEVICE void wgmma_ss(float (&d)[N / 2], unsigned long long a_desc, unsigned long long b_desc,
                        bool scale_d) {
  static_assert(kWgmmaInput<T>, "wgmma_ss: T is half_t or bfloat16_t");
  static_assert(kWgmmaDeviceN<N>, "wgmma_ss: device PTX is written for N = 64 and 128 only");
  if constexpr (N == 64 && kWgmmaF16<T>) FJ_WGMMA_SS_ASM(64, "f16");
  if constexpr (N == 64 && !kWgmmaF16<T>) FJ_WGMMA_SS_ASM(64, "bf16");
  if constexpr (N == 128 && kWgmmaF16<T>) FJ_WGMMA_SS_ASM(128, "f16");
  if constexpr (N == 128 && !kWgmmaF16<T>) FJ_WGMMA_SS_ASM(128, "bf16");
}

/// The same with A from registers: this warp's 16 rows as an m16n8k16 A fragment.
template <typename T, int N, bool TransB = false>
FJ_DEVICE void wgmma_rs(float (&d)[N / 2], const FragmentA& a, unsigned long long b_desc,
                        bool scale_d) {
  static_assert(kWgmmaInput<T>, "wgmma_rs: T is half_t or bfloat16_t");
  static_assert(kWgmmaDeviceN<N>, "wgmma_rs: device PTX is written for N = 64 and 128 only");
  if constexpr (N == 64 && kWgmmaF16<T>) FJ_WGMMA_RS_ASM(64, "f16");
  if constexpr (N == 64 && !kWgmmaF16<T>) FJ_WGMMA_RS_ASM(64, "bf16");
  if constexpr (N == 128 && kWgmmaF16<T>) FJ_WGMMA_RS_ASM(128, "f16");
  if constexpr (N == 128 && !kWgmmaF16<T>) FJ_WGMMA_RS_ASM(128, "bf16");
}

#else  // host twins: the emulator's model of the same instructions

inline void wgmma_fence() { emulator::wgmma_fence(); }
inline void wgmma_commit_group() { emulator::wgmma_commit_group(); }
template <int Pending>
inline void wgmma_wait_group() {
  emulator::wgmma_wait_group(Pending);
}

template <typename T>
constexpr emulator::MmaInput kWgmmaEmulatorInput =
    kWgmmaF16<T> ? emulator::MmaInput::f16 : emulator::MmaInput::bf16;

template <typename T, int N, bool TransA = false, bool TransB = false>
inline void wgmma_ss(float (&d)[N / 2], unsigned long long a_desc, unsigned long long b_desc,
                     bool scale_d) {
  static_assert(kWgmmaInput<T>, "wgmma: T is half_t or bfloat16_t");
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma: N is a multiple of 8 in 8..256");
  emulator::wgmma_ss(kWgmmaEmulatorInput<T>, N, d, a_desc, b_desc, scale_d, 1, 1, TransA, TransB);
}

template <typename T, int N, bool TransB = false>
inline void wgmma_rs(float (&d)[N / 2], const FragmentA& a, unsigned long long b_desc,
                     bool scale_d) {
  static_assert(kWgmmaInput<T>, "wgmma: T is half_t or bfloat16_t");
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma: N is a multiple of 8 in 8..256");
  const std::uint32_t regs[4] = {a.regs[0], a.regs[1], a.regs[2], a.regs[3]};
  emulator::wgmma_rs(kWgmmaEmulatorInput<T>, N, d, regs, b_desc, scale_d, 1, 1, TransB);
}

#endif

}  // namespace flashjit
