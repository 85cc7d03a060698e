#pragma once
// wgmma over fp8 e4m3 (tile/wgmma.cuh's wgmma_ss and wgmma_rs with T = e4m3x2_t): the
// m64nNk32.f32.e4m3.e4m3 instructions, one specialization of WgmmaE4m3Asm per N. Kept apart so
// that only the fp8 kernels, which include this header, parse them.
#include "tile/wgmma.cuh"

namespace flashjit {

#if defined(FJ_DEVICE_CODE)

// As the 16-bit forms, k32, with no transposes (fp8 operands are K-major): SS: %0 a-desc, %1
// b-desc, %2 scale-d, %3..%5 unused; RS: %0..%3 A, %4 b-desc, %5 scale-d; accumulators from %6.
#define FJ_WGMMA_SS_E4M3_ASM(n)                                                       \
  asm volatile(                                                                       \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n"                                     \
      "wgmma.mma_async.sync.aligned.m64n" #n                                          \
      "k32.f32.e4m3.e4m3 {" FJ_WGMMA_D_N##n(FJ_WGMMA_LIST) "}, %0, %1, p, 1, 1;\n}\n" \
      : "+l"(a_desc), "+l"(b_desc), "+r"(scale), "+r"(unused[0]), "+r"(unused[1]),    \
        "+r"(unused[2])FJ_WGMMA_D_N##n(FJ_WGMMA_OPERANDS))

#define FJ_WGMMA_RS_E4M3_ASM(n)                                                           \
  asm volatile(                                                                           \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n"                                         \
      "wgmma.mma_async.sync.aligned.m64n" #n                                              \
      "k32.f32.e4m3.e4m3"                                                                 \
      " {" FJ_WGMMA_D_N##n(FJ_WGMMA_LIST) "}, {%0, %1, %2, %3}, %4, p, 1, 1;\n}\n"        \
      : "+r"(a_regs[0]), "+r"(a_regs[1]), "+r"(a_regs[2]), "+r"(a_regs[3]), "+l"(b_desc), \
        "+r"(scale)FJ_WGMMA_D_N##n(FJ_WGMMA_OPERANDS))

#define FJ_WGMMA_E4M3_SPECIALIZATION(n)                                                           \
  template <>                                                                                     \
  struct WgmmaE4m3Asm<n> {                                                                        \
    static FJ_DEVICE void ss(float (&d)[n / 2], unsigned long long a_desc,                        \
                             unsigned long long b_desc, int scale, int (&unused)[3]) {            \
      FJ_WGMMA_SS_E4M3_ASM(n);                                                                    \
    }                                                                                             \
    static FJ_DEVICE void rs(float (&d)[n / 2], unsigned (&a_regs)[4], unsigned long long b_desc, \
                             int scale) {                                                         \
      FJ_WGMMA_RS_E4M3_ASM(n);                                                                    \
    }                                                                                             \
  };
FJ_WGMMA_EACH_N(FJ_WGMMA_E4M3_SPECIALIZATION)

#endif  // (the emulator's wgmma_ss and wgmma_rs take every input type themselves)

}  // namespace flashjit
