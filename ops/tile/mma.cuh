#pragma once
// mma.sync m16n8k16 with fp32 accumulation, and the fragments it takes. Layouts (PTX ISA,
// "Matrix Fragments for mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   A (16x16, row-major), 4 registers of two elements: a0 (g, 2t..2t+1), a1 (g+8, 2t..),
//     a2 (g, 2t+8..), a3 (g+8, 2t+8..);
//   B (16x8, column-major), 2 registers: b0 (k = 2t..2t+1, n = g), b1 (k = 2t+8.., n = g);
//   C/D (16x8, fp32): c0, c1 at (g, 2t), (g, 2t+1); c2, c3 at (g+8, 2t), (g+8, 2t+1).
// Over e4m3x2_t (two fp8 codes a 16-bit element) the same registers are m16n8k32's e4m3
// fragments ("Matrix Fragments for mma.m16n8k32"): a0 (g, bytes 4t..4t+3), a1 (g+8, 4t..),
// a2 (g, 16+4t..), a3 (g+8, 16+4t..); b0 (k = 4t..4t+3, n = g), b1 (k = 16+4t.., n = g): the
// 16-bit layout with each element's two bytes as two consecutive k.
#include "tile/numeric.cuh"

namespace flashjit {

/// The A operand of one m16n8k16 mma (16x16, 16-bit elements, packed in pairs).
struct FragmentA {
  unsigned regs[4];
};
/// The B operand of one m16n8k16 mma (16x8).
struct FragmentB {
  unsigned regs[2];
};

#if defined(FJ_DEVICE_CODE)

/// Two fp32 values rounded to T and packed, `low` in the low half (the lower column).
template <typename T>
FJ_DEVICE unsigned pack2(float low, float high);
template <>
FJ_DEVICE unsigned pack2<half_t>(float low, float high) {
  unsigned packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(high), "f"(low));
  return packed;
}
template <>
FJ_DEVICE unsigned pack2<bfloat16_t>(float low, float high) {
  unsigned packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(high), "f"(low));
  return packed;
}

/// d = a · b + c on the warp's fragments (every lane of the warp takes part).
template <typename T>
FJ_DEVICE void mma_m16n8k16(float (&d)[4], const FragmentA& a, const FragmentB& b,
                            const float (&c)[4]);
template <>
FJ_DEVICE void mma_m16n8k16<half_t>(float (&d)[4], const FragmentA& a, const FragmentB& b,
                                    const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a.regs[0]), "r"(a.regs[1]), "r"(a.regs[2]), "r"(a.regs[3]), "r"(b.regs[0]),
        "r"(b.regs[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
template <>
FJ_DEVICE void mma_m16n8k16<bfloat16_t>(float (&d)[4], const FragmentA& a, const FragmentB& b,
                                        const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a.regs[0]), "r"(a.regs[1]), "r"(a.regs[2]), "r"(a.regs[3]), "r"(b.regs[0]),
        "r"(b.regs[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/// mma.sync m16n8k32 over fp8 e4m3 (sm_89 on), as a 16-bit step of e4m3x2_t.
template <>
FJ_DEVICE void mma_m16n8k16<e4m3x2_t>(float (&d)[4], const FragmentA& a, const FragmentB& b,
                                      const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a.regs[0]), "r"(a.regs[1]), "r"(a.regs[2]), "r"(a.regs[3]), "r"(b.regs[0]),
        "r"(b.regs[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/// Four fp32 values rounded to e4m3 (saturating) and packed, `v0` in the lowest byte.
FJ_DEVICE unsigned pack4_e4m3(float v0, float v1, float v2, float v3) {
  unsigned short low, high;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(low) : "f"(v1), "f"(v0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(high) : "f"(v3), "f"(v2));
  return unsigned(low) | unsigned(high) << 16;
}

#else  // host twins

inline unsigned pack4_e4m3(float v0, float v1, float v2, float v3) {
  return e4m3_from_float(v0) | e4m3_from_float(v1) << 8 | e4m3_from_float(v2) << 16 |
         e4m3_from_float(v3) << 24;
}

template <typename T>
inline unsigned pack2(float low, float high) {
  return static_cast<unsigned>(from_float<T>(low).bits) |
         static_cast<unsigned>(from_float<T>(high).bits) << 16;
}

template <typename T>
inline void mma_m16n8k16(float (&d)[4], const FragmentA& a, const FragmentB& b,
                         const float (&c)[4]) {
  if constexpr (std::is_same_v<T, e4m3x2_t>) {
    emulator::mma_m16n8k32_e4m3(d, a.regs, b.regs, c);
  } else {
    constexpr auto kInput =
        std::is_same_v<T, half_t> ? emulator::MmaInput::f16 : emulator::MmaInput::bf16;
    emulator::mma_m16n8k16(kInput, d, a.regs, b.regs, c);
  }
}

#endif

}  // namespace flashjit
