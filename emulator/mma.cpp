// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, and m16n8k32 over fp8 e4m3,
// on the emulator: a warp exchange whose compute gathers the 32 lanes' fragments into whole
// matrices, multiplies, and scatters D back. The fragment layouts are the PTX ISA's, sections
// "Matrix Fragments for mma.m16n8k16 with floating point type" and "... for mma.m16n8k32"
// (9.7.14.5.x or 9.7.15.5.x depending on the ISA version), written below as its formulas with
//   groupID = %laneid >> 2,  threadID_in_group = %laneid % 4.
#include <array>
#include <cstdint>
#include <vector>

#include "emulator/machine.hpp"
#include "tile/numeric.cuh"

namespace flashjit::emulator {
namespace {

struct Position {
  int row = 0;
  int col = 0;
};

constexpr int group_id(int lane) { return lane >> 2; }
constexpr int thread_in_group(int lane) { return lane % 4; }

// Multiplicand A (16 x 16, .f16/.bf16): a0..a7, two per .f16x2 register, low half first.
//   row = groupID for ai where 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise
//   col = threadID_in_group * 2 + (i & 1), + 8 for ai where i >= 4
constexpr Position a_position(int lane, int i) {
  const bool upper_rows = !((0 <= i && i < 2) || (4 <= i && i < 6));
  return {group_id(lane) + (upper_rows ? 8 : 0),
          thread_in_group(lane) * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
}

// Multiplicand B (16 x 8, .f16/.bf16): b0..b3, two per .f16x2 register, low half first.
//   row = threadID_in_group * 2 + (i & 1), + 8 for bi where i >= 2;  col = groupID
constexpr Position b_position(int lane, int i) {
  return {thread_in_group(lane) * 2 + (i & 1) + (i >= 2 ? 8 : 0), group_id(lane)};
}

// Accumulators C and D (16 x 8, .f32): c0..c3, one per register.
//   row = groupID for ci where i < 2, groupID + 8 otherwise;  col = threadID_in_group * 2 + (i & 1)
constexpr Position c_position(int lane, int i) {
  return {group_id(lane) + (i >= 2 ? 8 : 0), thread_in_group(lane) * 2 + (i & 1)};
}

// The formulas as tables, so the per-call gather and scatter are plain loads.
template <int Elements, Position (*Where)(int, int)>
constexpr auto layout_table() {
  std::array<std::array<Position, Elements>, 32> table{};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < Elements; ++i) table[lane][i] = Where(lane, i);
  }
  return table;
}
constexpr auto kA = layout_table<8, a_position>();
constexpr auto kB = layout_table<4, b_position>();
constexpr auto kC = layout_table<4, c_position>();

/// One lane's operands, on its suspended stack while the last lane computes.
struct MmaLane {
  float* d;
  const std::uint32_t* a;
  const std::uint32_t* b;
  const float* c;
};

// Every fp16 bit pattern as fp32, from the one conversion (tile/numeric.cuh): a table lookup
// instead of its branches, for the 384 elements of each mma.
const float* half_to_float_table() {
  static const std::vector<float> table = [] {
    std::vector<float> values(1 << 16);
    for (std::size_t bits = 0; bits < values.size(); ++bits) {
      values[bits] = to_float(half_t{static_cast<unsigned short>(bits)});
    }
    return values;
  }();
  return table.data();
}

// Element i of a fragment of .f16x2 registers: register i / 2, low half for even i.
template <MmaInput Input>
float element(const float* half_table, const std::uint32_t* registers, int i) {
  const auto bits = static_cast<unsigned short>(registers[i / 2] >> (16 * (i % 2)));
  if constexpr (Input == MmaInput::f16) {
    return half_table[bits];
  } else {
    return to_float(bfloat16_t{bits});
  }
}

// 2·m·n·k: a multiply and an add per (m, n, k).
constexpr std::uint64_t kMmaFlops = 2 * 16 * 8 * 16;

template <MmaInput Input>
void compute(void* const* lanes) {
  detail::active()->report.work.tensor_flops += kMmaFlops;
  const float* half_table = Input == MmaInput::f16 ? half_to_float_table() : nullptr;
  float a[16][16], b[16][8], acc[16][8];
  for (int lane = 0; lane < 32; ++lane) {  // gather everything first: d may alias c
    const MmaLane& l = *static_cast<const MmaLane*>(lanes[lane]);
    for (int i = 0; i < 8; ++i) {
      a[kA[lane][i].row][kA[lane][i].col] = element<Input>(half_table, l.a, i);
    }
    for (int i = 0; i < 4; ++i) {
      b[kB[lane][i].row][kB[lane][i].col] = element<Input>(half_table, l.b, i);
    }
    for (int i = 0; i < 4; ++i) acc[kC[lane][i].row][kC[lane][i].col] = l.c[i];
  }
  // D = A B + C, k in order. A product of two 16-bit floats is exact in fp32 (short of bf16
  // products beyond fp32's range), so each step is one rounding, as fma(a, b, d) would be.
  for (int m = 0; m < 16; ++m) {
    for (int k = 0; k < 16; ++k) {
      for (int n = 0; n < 8; ++n) acc[m][n] += a[m][k] * b[k][n];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const MmaLane& l = *static_cast<const MmaLane*>(lanes[lane]);
    for (int i = 0; i < 4; ++i) l.d[i] = acc[kC[lane][i].row][kC[lane][i].col];
  }
}

// mma.m16n8k32 with .e4m3 (PTX ISA, "Matrix Fragments for mma.m16n8k32"): four 8-bit elements a
// .b32 register, the lowest byte first.
// Multiplicand A (16 x 32): a0..a15.
//   row = groupID for ai where 0 <= i < 4 || 8 <= i < 12, groupID + 8 otherwise
//   col = threadID_in_group * 4 + (i & 3), + 16 for ai where i >= 8
constexpr Position a_position_k32(int lane, int i) {
  return {group_id(lane) + ((i >> 2) & 1) * 8, thread_in_group(lane) * 4 + (i & 3) + (i >> 3) * 16};
}
// Multiplicand B (32 x 8): b0..b7.
//   row = threadID_in_group * 4 + (i & 3), + 16 for bi where i >= 4;  col = groupID
constexpr Position b_position_k32(int lane, int i) {
  return {thread_in_group(lane) * 4 + (i & 3) + (i >> 2) * 16, group_id(lane)};
}
constexpr auto kA32 = layout_table<16, a_position_k32>();
constexpr auto kB32 = layout_table<8, b_position_k32>();

// Element i of a fragment of e4m3 registers: register i / 4, byte i % 4.
float e4m3_element(const std::uint32_t* registers, int i) {
  return float_from_e4m3((registers[i / 4] >> (8 * (i % 4))) & 0xffu);
}

void compute_e4m3(void* const* lanes) {
  detail::active()->report.work.tensor_flops += 2 * kMmaFlops;  // k 32
  float a[16][32], b[32][8], acc[16][8];
  for (int lane = 0; lane < 32; ++lane) {  // gather everything first: d may alias c
    const MmaLane& l = *static_cast<const MmaLane*>(lanes[lane]);
    for (int i = 0; i < 16; ++i) a[kA32[lane][i].row][kA32[lane][i].col] = e4m3_element(l.a, i);
    for (int i = 0; i < 8; ++i) b[kB32[lane][i].row][kB32[lane][i].col] = e4m3_element(l.b, i);
    for (int i = 0; i < 4; ++i) acc[kC[lane][i].row][kC[lane][i].col] = l.c[i];
  }
  // A product of two e4m3 values is exact in fp32; each step is one rounding, k in order.
  for (int m = 0; m < 16; ++m) {
    for (int k = 0; k < 32; ++k) {
      for (int n = 0; n < 8; ++n) acc[m][n] += a[m][k] * b[k][n];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const MmaLane& l = *static_cast<const MmaLane*>(lanes[lane]);
    for (int i = 0; i < 4; ++i) l.d[i] = acc[kC[lane][i].row][kC[lane][i].col];
  }
}

constexpr WarpExchange kMmaF16{"mma.sync.m16n8k16.f32.f16.f16.f32", &compute<MmaInput::f16>};
constexpr WarpExchange kMmaBf16{"mma.sync.m16n8k16.f32.bf16.bf16.f32", &compute<MmaInput::bf16>};
constexpr WarpExchange kMmaE4m3{"mma.sync.m16n8k32.f32.e4m3.e4m3.f32", &compute_e4m3};

}  // namespace

void mma_m16n8k16(MmaInput input, float (&d)[4], const std::uint32_t (&a)[4],
                  const std::uint32_t (&b)[2], const float (&c)[4]) {
  MmaLane lane{d, a, b, c};
  // .aligned: every lane of the warp takes part; fewer never complete (reported as a deadlock).
  warp_exchange(0xffffffffu, &lane,
                input == MmaInput::f16    ? kMmaF16
                : input == MmaInput::bf16 ? kMmaBf16
                                          : kMmaE4m3);  // e4m3: the same registers are m16n8k32's
}

void mma_m16n8k32_e4m3(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                       const float (&c)[4]) {
  MmaLane lane{d, a, b, c};
  warp_exchange(0xffffffffu, &lane, kMmaE4m3);
}

}  // namespace flashjit::emulator
