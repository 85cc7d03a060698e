// mma.sync m16n8k16 on the emulator against a scalar matmul on random f16 and bf16 data. The
// fragments are built here from this file's own reading of the PTX ISA ("Matrix Fragments for
// mma.m16n8k16 with floating point type"), register by register, rather than from the
// emulator's tables, so a layout slip on either side shows.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"

namespace {

namespace em = flashjit::emulator;
constexpr int kWarps = 2;  // each warp multiplies its own matrices

/// Where fragment element lives, per the PTX ISA's figures for m16n8k16 (.f16/.bf16 A and B,
/// .f32 C/D), with g = lane / 4 and t = lane % 4:
///  A register 0: row g,   columns 2t and 2t+1     A register 1: row g+8, columns 2t, 2t+1
///  A register 2: row g,   columns 2t+8 and 2t+9   A register 3: row g+8, columns 2t+8, 2t+9
///  B register 0: rows 2t and 2t+1, column g       B register 1: rows 2t+8 and 2t+9, column g
///  C/D element 0, 1: row g, columns 2t, 2t+1      C/D element 2, 3: row g+8, columns 2t, 2t+1
/// The first element of a register pair is its low 16 bits.
struct Spot {
  int row, col;
};
Spot a_spot(int lane, int reg, int half) {
  const int row_offset[4] = {0, 8, 0, 8}, col_offset[4] = {0, 0, 8, 8};
  return {lane / 4 + row_offset[reg], 2 * (lane % 4) + col_offset[reg] + half};
}
Spot b_spot(int lane, int reg, int half) { return {2 * (lane % 4) + 8 * reg + half, lane / 4}; }
Spot c_spot(int lane, int element) {
  return {lane / 4 + (element >= 2 ? 8 : 0), 2 * (lane % 4) + element % 2};
}

template <class T>
unsigned short bits_of(const T* matrix, int index) {  // a 16-bit element, read as the kernel does
  if constexpr (std::is_same_v<T, flashjit::half_t>) {
    return flashjit::to_half(flashjit::load_global(matrix, index)).bits;
  } else {
    return flashjit::to_bfloat16(flashjit::load_global(matrix, index)).bits;
  }
}

/// Warp w multiplies a[w] (16 x 16, row-major) by b[w] (16 x 8, row-major: k then n), adds
/// c[w] (16 x 8) and writes d[w].
template <class T>
__global__ void mma_kernel(const T* a, const T* b, const float* c, float* d) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  std::uint32_t a_regs[4], b_regs[2];
  float c_regs[4], d_regs[4];
  for (int reg = 0; reg < 4; ++reg) {
    const Spot lo = a_spot(lane, reg, 0), hi = a_spot(lane, reg, 1);
    a_regs[reg] = bits_of(a, warp * 256 + lo.row * 16 + lo.col) |
                  std::uint32_t{bits_of(a, warp * 256 + hi.row * 16 + hi.col)} << 16;
  }
  for (int reg = 0; reg < 2; ++reg) {
    const Spot lo = b_spot(lane, reg, 0), hi = b_spot(lane, reg, 1);
    b_regs[reg] = bits_of(b, warp * 128 + lo.row * 8 + lo.col) |
                  std::uint32_t{bits_of(b, warp * 128 + hi.row * 8 + hi.col)} << 16;
  }
  for (int i = 0; i < 4; ++i) {
    c_regs[i] =
        flashjit::load_global(c, warp * 128 + c_spot(lane, i).row * 8 + c_spot(lane, i).col);
  }
  constexpr auto input =
      std::is_same_v<T, flashjit::half_t> ? em::MmaInput::f16 : em::MmaInput::bf16;
  em::mma_m16n8k16(input, d_regs, a_regs, b_regs, c_regs);
  for (int i = 0; i < 4; ++i) {
    flashjit::store_global(d, warp * 128 + c_spot(lane, i).row * 8 + c_spot(lane, i).col,
                           d_regs[i]);
  }
}

template <class T>
void check_mma(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<T> a(kWarps * 256), b(kWarps * 128);
  std::vector<float> c(kWarps * 128), d(kWarps * 128, std::nanf(""));
  for (T& x : a) x = flashjit::from_float<T>(normal(rng));
  for (T& x : b) x = flashjit::from_float<T>(normal(rng));
  for (float& x : c) x = normal(rng);
  em::LaunchConfig config{
      .kernel_name = "mma",
      .grid = {1},
      .block = {32 * kWarps},
      .buffers = {em::buffer_of(a.data(), a.size(), "a"), em::buffer_of(b.data(), b.size(), "b"),
                  em::buffer_of(c.data(), c.size(), "c"), em::buffer_of(d.data(), d.size(), "d")}};
  const em::Report report =
      em::launch(&mma_kernel<T>, config, a.data(), b.data(), c.data(), d.data());
  REQUIRE_MESSAGE(report.clean(), report);
  int mismatches = 0;
  for (int w = 0; w < kWarps; ++w) {
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 8; ++n) {
        double expected = c[w * 128 + m * 8 + n], magnitude = std::fabs(expected);
        for (int k = 0; k < 16; ++k) {
          const double product = double(flashjit::to_float(a[w * 256 + m * 16 + k])) *
                                 flashjit::to_float(b[w * 128 + k * 8 + n]);
          expected += product;
          magnitude += std::fabs(product);
        }
        const double actual = d[w * 128 + m * 8 + n];
        if (std::fabs(actual - expected) > 2e-6 * magnitude) {
          if (++mismatches <= 4)
            MESSAGE("d[", w, "][", m, "][", n, "] = ", actual, " != ", expected);
        }
      }
    }
  }
  CHECK(mismatches == 0);
}

/// mma.sync m16n8k32 over e4m3, per the PTX ISA's figures for m16n8k32 (.e4m3 A and B), with
/// g = lane / 4 and t = lane % 4: A register r holds row g (r even) or g + 8 (r odd), columns
/// 4t .. 4t+3, plus 16 for r >= 2; B register r rows 4t .. 4t+3 (plus 16 for r = 1) of column
/// g; byte i of a register is its column (row) 4t + i. C/D as m16n8k16's.
std::uint32_t e4m3_a_register(const std::uint8_t* a, int lane, int reg) {
  const int row = lane / 4 + (reg % 2) * 8, col0 = 4 * (lane % 4) + (reg / 2) * 16;
  std::uint32_t bits = 0;
  for (int i = 0; i < 4; ++i) {
    bits |= static_cast<std::uint32_t>(flashjit::load_global(a, row * 32 + col0 + i)) << (8 * i);
  }
  return bits;
}
std::uint32_t e4m3_b_register(const std::uint8_t* b, int lane, int reg) {
  const int row0 = 4 * (lane % 4) + reg * 16, col = lane / 4;
  std::uint32_t bits = 0;
  for (int i = 0; i < 4; ++i) {
    bits |= static_cast<std::uint32_t>(flashjit::load_global(b, (row0 + i) * 8 + col)) << (8 * i);
  }
  return bits;
}

/// One warp: d = a (16 x 32, row-major codes) · b (32 x 8, row-major codes) + c.
__global__ void mma_e4m3_kernel(const std::uint8_t* a, const std::uint8_t* b, const float* c,
                                float* d) {
  const int lane = static_cast<int>(threadIdx.x);
  std::uint32_t a_regs[4], b_regs[2];
  float c_regs[4], d_regs[4];
  for (int reg = 0; reg < 4; ++reg) a_regs[reg] = e4m3_a_register(a, lane, reg);
  for (int reg = 0; reg < 2; ++reg) b_regs[reg] = e4m3_b_register(b, lane, reg);
  for (int i = 0; i < 4; ++i) {
    c_regs[i] = flashjit::load_global(c, c_spot(lane, i).row * 8 + c_spot(lane, i).col);
  }
  em::mma_m16n8k32_e4m3(d_regs, a_regs, b_regs, c_regs);
  for (int i = 0; i < 4; ++i) {
    flashjit::store_global(d, c_spot(lane, i).row * 8 + c_spot(lane, i).col, d_regs[i]);
  }
}

}  // namespace

TEST_CASE("mma.sync m16n8k32 over e4m3 equals C + A B for random codes") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> code(0, 255);
  std::vector<std::uint8_t> a(16 * 32), b(32 * 8);
  for (auto* m : {&a, &b}) {
    for (auto& x : *m) {
      x = static_cast<std::uint8_t>(code(rng));
      if ((x & 0x7F) == 0x7F) x = 0x3F;  // no NaN codes
    }
  }
  std::vector<float> c(128), d(128, std::nanf(""));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : c) x = normal(rng);
  em::LaunchConfig config{
      .kernel_name = "mma_e4m3",
      .grid = {1},
      .block = {32},
      .buffers = {em::buffer_of(a.data(), a.size(), "a"), em::buffer_of(b.data(), b.size(), "b"),
                  em::buffer_of(c.data(), c.size(), "c"), em::buffer_of(d.data(), d.size(), "d")}};
  const em::Report report =
      em::launch(&mma_e4m3_kernel, config, a.data(), b.data(), c.data(), d.data());
  REQUIRE_MESSAGE(report.clean(), report);
  const auto value = [](std::uint8_t bits) { return double(flashjit::float_from_e4m3(bits)); };
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      double expected = c[m * 8 + n], magnitude = std::fabs(expected);
      for (int k = 0; k < 32; ++k) {
        expected += value(a[m * 32 + k]) * value(b[k * 8 + n]);
        magnitude += std::fabs(value(a[m * 32 + k]) * value(b[k * 8 + n]));
      }
      CHECK_MESSAGE(std::fabs(d[m * 8 + n] - expected) <= 2e-6 * magnitude, m, " ", n);
    }
  }
}

TEST_CASE_TEMPLATE("mma.sync m16n8k16 equals C + A B for random inputs", T, flashjit::half_t,
                   flashjit::bfloat16_t) {
  for (unsigned seed = 1; seed <= 4; ++seed) {
    CAPTURE(seed);
    check_mma<T>(seed);
  }
}
