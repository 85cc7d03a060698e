#pragma once
// wgmma (Hopper warpgroup MMA, sm_90a): D (64 x N, fp32) = A (64 x 16) · B (16 x N) (+ D),
// issued by the 128 threads of a warpgroup, asynchronously. A comes from shared memory through
// a matrix descriptor (SS) or from registers in the mma.sync A-fragment layout, warp w holding
// rows 16w..16w+15 (RS); B always from a descriptor. Accumulators: thread t, warp w = t / 32,
// lane l, register i of N / 2: row 16w + l/4 + 8·((i>>1)&1), column 8·(i>>2) + 2·(l%4) + (i&1).
// Protocol (PTX ISA): wgmma_fence() before the first wgmma and after registers they use were
// touched; wgmma_commit_group() after issuing; wgmma_wait_group<N>() before reading results or
// overwriting the shared operands. The emulator's twin checks all three (emulator/wgmma.cpp).
// Over e4m3x2_t (two fp8 codes a 16-bit element) the same tiles, descriptors and fragments are
// m64nNk32.e4m3's: K-major only, each element two consecutive k (their instructions are in
// tile/wgmma_e4m3.cuh, which a kernel that uses them includes).
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
/// (interleave only), SBO to the next 8 rows; MN-major: the PTX ISA's wgmma matrix descriptor.
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

/// `descriptor` moved `bytes` (a multiple of 16) on in shared memory. The start address is the
/// low 14 bits of the descriptor as address / 16, and shared addresses stay below 256 KB
/// (228 KB on sm_90), so the sum never carries out of the field: one add per k16 step instead
/// of converting and masking an address for every wgmma.
FJ_HOST_DEVICE constexpr unsigned long long advance_descriptor(unsigned long long descriptor,
                                                               unsigned bytes) {
  return descriptor + (bytes >> 4);
}

/// Whether T is .f16 (else .bf16, the only other 16-bit input written here).
template <typename T>
constexpr bool kWgmmaF16 = false;
template <>
constexpr bool kWgmmaF16<half_t> = true;
/// Whether T is pairs of fp8 e4m3 codes (e4m3x2_t): m64nNk32.e4m3, K-major operands only, the
/// 16-bit layouts with two consecutive k in each element.
template <typename T>
constexpr bool kWgmmaE4m3 = false;
template <>
constexpr bool kWgmmaE4m3<e4m3x2_t> = true;
template <typename T>
constexpr bool kWgmmaInput = kWgmmaF16<T> || kWgmmaE4m3<T>;
template <>
constexpr bool kWgmmaInput<bfloat16_t> = true;

/// The N of m64nNk16 (device PTX and emulator alike): a multiple of 8 in 8..256.
template <int N>
constexpr bool kWgmmaN = N % 8 == 0 && N >= 8 && N <= 256;

#if defined(FJ_DEVICE_CODE)

FJ_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
FJ_DEVICE void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int Pending>
FJ_DEVICE void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// Operand numbering. The asm operands are all read-write outputs, so that the six operands
// that are not accumulators come first at fixed numbers and the accumulators follow at
// %6 .. %(5 + N/2) for every N (inputs would be numbered after the accumulators, at numbers that
// change with N): SS: %0 a-desc, %1 b-desc, %2 scale-d, %3..%5 unused; RS: %0..%3 A, %4 b-desc,
// %5 scale-d.
//
// FJ_WGMMA_D_N<N>(F) applies F(first register, its operand names) to the accumulator registers
// of m64nNk16 four at a time: each line adds the next four to the previous N's. F makes the
// register list of the instruction (FJ_WGMMA_LIST) or the asm operands (FJ_WGMMA_OPERANDS).
#define FJ_WGMMA_D_N8(F) F(0, "%6, %7, %8, %9")
#define FJ_WGMMA_D_N16(F) FJ_WGMMA_D_N8(F) F(4, ", %10, %11, %12, %13")
#define FJ_WGMMA_D_N24(F) FJ_WGMMA_D_N16(F) F(8, ", %14, %15, %16, %17")
#define FJ_WGMMA_D_N32(F) FJ_WGMMA_D_N24(F) F(12, ", %18, %19, %20, %21")
#define FJ_WGMMA_D_N40(F) FJ_WGMMA_D_N32(F) F(16, ", %22, %23, %24, %25")
#define FJ_WGMMA_D_N48(F) FJ_WGMMA_D_N40(F) F(20, ", %26, %27, %28, %29")
#define FJ_WGMMA_D_N56(F) FJ_WGMMA_D_N48(F) F(24, ", %30, %31, %32, %33")
#define FJ_WGMMA_D_N64(F) FJ_WGMMA_D_N56(F) F(28, ", %34, %35, %36, %37")
#define FJ_WGMMA_D_N72(F) FJ_WGMMA_D_N64(F) F(32, ", %38, %39, %40, %41")
#define FJ_WGMMA_D_N80(F) FJ_WGMMA_D_N72(F) F(36, ", %42, %43, %44, %45")
#define FJ_WGMMA_D_N88(F) FJ_WGMMA_D_N80(F) F(40, ", %46, %47, %48, %49")
#define FJ_WGMMA_D_N96(F) FJ_WGMMA_D_N88(F) F(44, ", %50, %51, %52, %53")
#define FJ_WGMMA_D_N104(F) FJ_WGMMA_D_N96(F) F(48, ", %54, %55, %56, %57")
#define FJ_WGMMA_D_N112(F) FJ_WGMMA_D_N104(F) F(52, ", %58, %59, %60, %61")
#define FJ_WGMMA_D_N120(F) FJ_WGMMA_D_N112(F) F(56, ", %62, %63, %64, %65")
#define FJ_WGMMA_D_N128(F) FJ_WGMMA_D_N120(F) F(60, ", %66, %67, %68, %69")
#define FJ_WGMMA_D_N136(F) FJ_WGMMA_D_N128(F) F(64, ", %70, %71, %72, %73")
#define FJ_WGMMA_D_N144(F) FJ_WGMMA_D_N136(F) F(68, ", %74, %75, %76, %77")
#define FJ_WGMMA_D_N152(F) FJ_WGMMA_D_N144(F) F(72, ", %78, %79, %80, %81")
#define FJ_WGMMA_D_N160(F) FJ_WGMMA_D_N152(F) F(76, ", %82, %83, %84, %85")
#define FJ_WGMMA_D_N168(F) FJ_WGMMA_D_N160(F) F(80, ", %86, %87, %88, %89")
#define FJ_WGMMA_D_N176(F) FJ_WGMMA_D_N168(F) F(84, ", %90, %91, %92, %93")
#define FJ_WGMMA_D_N184(F) FJ_WGMMA_D_N176(F) F(88, ", %94, %95, %96, %97")
#define FJ_WGMMA_D_N192(F) FJ_WGMMA_D_N184(F) F(92, ", %98, %99, %100, %101")
#define FJ_WGMMA_D_N200(F) FJ_WGMMA_D_N192(F) F(96, ", %102, %103, %104, %105")
#define FJ_WGMMA_D_N208(F) FJ_WGMMA_D_N200(F) F(100, ", %106, %107, %108, %109")
#define FJ_WGMMA_D_N216(F) FJ_WGMMA_D_N208(F) F(104, ", %110, %111, %112, %113")
#define FJ_WGMMA_D_N224(F) FJ_WGMMA_D_N216(F) F(108, ", %114, %115, %116, %117")
#define FJ_WGMMA_D_N232(F) FJ_WGMMA_D_N224(F) F(112, ", %118, %119, %120, %121")
#define FJ_WGMMA_D_N240(F) FJ_WGMMA_D_N232(F) F(116, ", %122, %123, %124, %125")
#define FJ_WGMMA_D_N248(F) FJ_WGMMA_D_N240(F) F(120, ", %126, %127, %128, %129")
#define FJ_WGMMA_D_N256(F) FJ_WGMMA_D_N248(F) F(124, ", %130, %131, %132, %133")
// The transposes are "n" inputs (immediates), numbered after the outputs: m64nNk16's first two
// inputs are %(6 + N/2) and %(7 + N/2). One asm per N and type then serves every transpose.
// clang-format off
#define FJ_WGMMA_IMM_N8 10, 11
#define FJ_WGMMA_IMM_N16 14, 15
#define FJ_WGMMA_IMM_N24 18, 19
#define FJ_WGMMA_IMM_N32 22, 23
#define FJ_WGMMA_IMM_N40 26, 27
#define FJ_WGMMA_IMM_N48 30, 31
#define FJ_WGMMA_IMM_N56 34, 35
#define FJ_WGMMA_IMM_N64 38, 39
#define FJ_WGMMA_IMM_N72 42, 43
#define FJ_WGMMA_IMM_N80 46, 47
#define FJ_WGMMA_IMM_N88 50, 51
#define FJ_WGMMA_IMM_N96 54, 55
#define FJ_WGMMA_IMM_N104 58, 59
#define FJ_WGMMA_IMM_N112 62, 63
#define FJ_WGMMA_IMM_N120 66, 67
#define FJ_WGMMA_IMM_N128 70, 71
#define FJ_WGMMA_IMM_N136 74, 75
#define FJ_WGMMA_IMM_N144 78, 79
#define FJ_WGMMA_IMM_N152 82, 83
#define FJ_WGMMA_IMM_N160 86, 87
#define FJ_WGMMA_IMM_N168 90, 91
#define FJ_WGMMA_IMM_N176 94, 95
#define FJ_WGMMA_IMM_N184 98, 99
#define FJ_WGMMA_IMM_N192 102, 103
#define FJ_WGMMA_IMM_N200 106, 107
#define FJ_WGMMA_IMM_N208 110, 111
#define FJ_WGMMA_IMM_N216 114, 115
#define FJ_WGMMA_IMM_N224 118, 119
#define FJ_WGMMA_IMM_N232 122, 123
#define FJ_WGMMA_IMM_N240 126, 127
#define FJ_WGMMA_IMM_N248 130, 131
#define FJ_WGMMA_IMM_N256 134, 135
// clang-format on
#define FJ_WGMMA_SS_IMMS(...) FJ_WGMMA_SS_IMMS_(__VA_ARGS__)
#define FJ_WGMMA_SS_IMMS_(trans_a, trans_b) "%" #trans_a ", %" #trans_b
#define FJ_WGMMA_RS_IMM(...) FJ_WGMMA_RS_IMM_(__VA_ARGS__)
#define FJ_WGMMA_RS_IMM_(trans_b, unused) "%" #trans_b
#define FJ_WGMMA_LIST(first, names) names
#define FJ_WGMMA_OPERANDS(first, names) \
  , "+f"(d[first]), "+f"(d[first + 1]), "+f"(d[first + 2]), "+f"(d[first + 3])
// Eight N a line.
// clang-format off
#define FJ_WGMMA_EACH_N(X)                                \
  X(8)   X(16)  X(24)  X(32)  X(40)  X(48)  X(56)  X(64)  \
  X(72)  X(80)  X(88)  X(96)  X(104) X(112) X(120) X(128) \
  X(136) X(144) X(152) X(160) X(168) X(176) X(184) X(192) \
  X(200) X(208) X(216) X(224) X(232) X(240) X(248) X(256)
// clang-format on

// SS: scale-d as a predicate set from a register; imm-scale-a/b fixed at 1.
#define FJ_WGMMA_SS_ASM(n, TYPE)                                                             \
  asm volatile(                                                                              \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n"                                            \
      "wgmma.mma_async.sync.aligned.m64n" #n "k16.f32." TYPE "." TYPE " {" FJ_WGMMA_D_N##n(  \
          FJ_WGMMA_LIST) "}, %0, %1, p, 1, 1, " FJ_WGMMA_SS_IMMS(FJ_WGMMA_IMM_N##n) ";\n}\n" \
      : "+l"(a_desc), "+l"(b_desc), "+r"(scale), "+r"(unused[0]), "+r"(unused[1]),           \
        "+r"(unused[2])FJ_WGMMA_D_N##n(FJ_WGMMA_OPERANDS)                                    \
      : "n"(TransA ? 1 : 0), "n"(TransB ? 1 : 0))

#define FJ_WGMMA_RS_ASM(n, TYPE)                                                                \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n"                                               \
      "wgmma.mma_async.sync.aligned.m64n" #n "k16.f32." TYPE "." TYPE                           \
      " {" FJ_WGMMA_D_N##n(FJ_WGMMA_LIST) "}, {%0, %1, %2, %3}, %4, p, 1, 1, " FJ_WGMMA_RS_IMM( \
          FJ_WGMMA_IMM_N##n) ";\n}\n"                                                           \
      : "+r"(a_regs[0]), "+r"(a_regs[1]), "+r"(a_regs[2]), "+r"(a_regs[3]), "+l"(b_desc),       \
        "+r"(scale)FJ_WGMMA_D_N##n(FJ_WGMMA_OPERANDS)                                           \
      : "n"(TransB ? 1 : 0))
// One N's instructions over 16-bit inputs: a specialization per N, so that a wgmma call
// instantiates its own N's asm only. (With all 32 N's in one function body, selected by if
// constexpr, NVRTC's front end spent 40-66 ms on each wgmma function's first instantiation:
// about a tenth of a Hopper kernel's whole compile.) The e4m3 forms are WgmmaE4m3Asm's, in
// tile/wgmma_e4m3.cuh, which only the fp8 kernels include: parsing them costs every other
// Hopper kernel 40 ms.
template <int N>
struct WgmmaAsm;
template <int N>
struct WgmmaE4m3Asm;
// `form`'s asm for N = n in T's type, .f16 or .bf16.
#define FJ_WGMMA_IN_TYPE_OF(T, form, n) \
  if constexpr (kWgmmaF16<T>) {         \
    form(n, "f16");                     \
  } else {                              \
    form(n, "bf16");                    \
  }
#define FJ_WGMMA_SPECIALIZATION(n)                                                              \
  template <>                                                                                   \
  struct WgmmaAsm<n> {                                                                          \
    template <typename T, bool TransA, bool TransB>                                             \
    static FJ_DEVICE void ss(float (&d)[n / 2], unsigned long long a_desc,                      \
                             unsigned long long b_desc, int scale, int (&unused)[3]) {          \
      FJ_WGMMA_IN_TYPE_OF(T, FJ_WGMMA_SS_ASM, n);                                               \
    }                                                                                           \
    template <typename T, bool TransB>                                                          \
    static FJ_DEVICE void rs(float (&d)[n / 2], unsigned (&a_regs)[4], unsigned long long b_desc, \
                             int scale) {                                                       \
      FJ_WGMMA_IN_TYPE_OF(T, FJ_WGMMA_RS_ASM, n);                                               \
    }                                                                                           \
  };
FJ_WGMMA_EACH_N(FJ_WGMMA_SPECIALIZATION)

/// d (this thread's N / 2 accumulators) = A · B (+ d when scale_d), A and B from descriptors;
/// TransA / TransB: that operand is MN-major (not for e4m3x2_t, whose operands are K-major).
template <typename T, int N, bool TransA = false, bool TransB = false>
FJ_DEVICE void wgmma_ss(float (&d)[N / 2], unsigned long long a_desc, unsigned long long b_desc,
                        bool scale_d) {
  static_assert(kWgmmaInput<T>, "wgmma_ss: T is half_t, bfloat16_t or e4m3x2_t");
  static_assert(!kWgmmaE4m3<T> || (!TransA && !TransB), "wgmma: fp8 operands are K-major");
  static_assert(kWgmmaN<N>, "wgmma_ss: N is a multiple of 8 in 8..256");
  int unused[3] = {0, 0, 0};
  if constexpr (kWgmmaE4m3<T>) {  // (an incomplete type here: include tile/wgmma_e4m3.cuh)
    WgmmaE4m3Asm<N>::ss(d, a_desc, b_desc, scale_d ? 1 : 0, unused);
  } else {
    WgmmaAsm<N>::template ss<T, TransA, TransB>(d, a_desc, b_desc, scale_d ? 1 : 0, unused);
  }
}

/// The same with A from registers: this warp's 16 rows as an m16n8k16 A fragment.
template <typename T, int N, bool TransB = false>
FJ_DEVICE void wgmma_rs(float (&d)[N / 2], const FragmentA& a, unsigned long long b_desc,
                        bool scale_d) {
  static_assert(kWgmmaInput<T>, "wgmma_rs: T is half_t, bfloat16_t or e4m3x2_t");
  static_assert(!kWgmmaE4m3<T> || !TransB, "wgmma: fp8 operands are K-major");
  static_assert(kWgmmaN<N>, "wgmma_rs: N is a multiple of 8 in 8..256");
  unsigned a_regs[4] = {a.regs[0], a.regs[1], a.regs[2], a.regs[3]};
  if constexpr (kWgmmaE4m3<T>) {  // (an incomplete type here: include tile/wgmma_e4m3.cuh)
    WgmmaE4m3Asm<N>::rs(d, a_regs, b_desc, scale_d ? 1 : 0);
  } else {
    WgmmaAsm<N>::template rs<T, TransB>(d, a_regs, b_desc, scale_d ? 1 : 0);
  }
}

#else  // host twins: the emulator's model of the same instructions

inline void wgmma_fence() { emulator::wgmma_fence(); }
inline void wgmma_commit_group() { emulator::wgmma_commit_group(); }
template <int Pending>
inline void wgmma_wait_group() {
  emulator::wgmma_wait_group(Pending);
}

template <typename T>
constexpr emulator::MmaInput kWgmmaEmulatorInput = kWgmmaF16<T>    ? emulator::MmaInput::f16
                                                   : kWgmmaE4m3<T> ? emulator::MmaInput::e4m3
                                                                   : emulator::MmaInput::bf16;

template <typename T, int N, bool TransA = false, bool TransB = false>
inline void wgmma_ss(float (&d)[N / 2], unsigned long long a_desc, unsigned long long b_desc,
                     bool scale_d, std::source_location site = std::source_location::current()) {
  static_assert(kWgmmaInput<T>, "wgmma: T is half_t, bfloat16_t or e4m3x2_t");
  static_assert(kWgmmaN<N>, "wgmma: N is a multiple of 8 in 8..256");
  static_assert(!kWgmmaE4m3<T> || (!TransA && !TransB), "wgmma: fp8 operands are K-major");
  emulator::wgmma_ss(kWgmmaEmulatorInput<T>, N, d, a_desc, b_desc, scale_d, 1, 1, TransA, TransB,
                     site);
}

template <typename T, int N, bool TransB = false>
inline void wgmma_rs(float (&d)[N / 2], const FragmentA& a, unsigned long long b_desc,
                     bool scale_d, std::source_location site = std::source_location::current()) {
  static_assert(kWgmmaInput<T>, "wgmma: T is half_t, bfloat16_t or e4m3x2_t");
  static_assert(kWgmmaN<N>, "wgmma: N is a multiple of 8 in 8..256");
  static_assert(!kWgmmaE4m3<T> || !TransB, "wgmma: fp8 operands are K-major");
  // The fragment's own registers, not a copy: the emulator checks that they are not written
  // after the last wgmma_fence before this wgmma, nor until the wait that completes it.
  emulator::wgmma_rs(kWgmmaEmulatorInput<T>, N, d, a.regs, b_desc, scale_d, 1, 1, TransB, site);
}

#endif

}  // namespace flashjit
