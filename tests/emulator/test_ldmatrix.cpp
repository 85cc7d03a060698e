// ldmatrix m8n8 (x1, x2, x4, with and without .trans) on random shared data against the PTX
// ISA's fragment layout, and ldmatrix feeding mma.sync the way a tile library does.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"

namespace {

namespace em = flashjit::emulator;
constexpr int kWarps = 2;
constexpr int kRowStride = 24;                    // elements: 48-byte rows, padded but aligned
constexpr int kMatrixStride = 8 * kRowStride;     // (8, kRowStride)
constexpr int kWarpElements = 4 * kMatrixStride;  // (4 matrices, 8, kRowStride) per warp

/// Fills shared memory with `in` (16-bit values held exactly as floats), then each warp loads
/// its `Count` matrices; out gets every lane's registers as (register, half) values.
template <int Count, bool Transpose>
__global__ void ldmatrix_kernel(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x), lane = t % 32, warp = t / 32;
  auto* shared = flashjit::dynamic_shared<std::uint16_t>();  // (kWarps, kWarpElements)
  for (int i = t; i < kWarps * kWarpElements; i += 32 * kWarps) {
    flashjit::store_shared(shared, i, static_cast<std::uint16_t>(flashjit::load_global(in, i)));
  }
  __syncthreads();
  const std::uint16_t* row = lane < 8 * Count ? shared + warp * kWarpElements +
                                                    lane / 8 * kMatrixStride + lane % 8 * kRowStride
                                              : nullptr;  // ignored lanes pass anything
  std::uint32_t regs[Count];
  em::ldmatrix(Count, Transpose, regs, row);
  for (int m = 0; m < Count; ++m) {
    flashjit::store_global(out, t * 8 + 2 * m, float(regs[m] & 0xffffu));
    flashjit::store_global(out, t * 8 + 2 * m + 1, float(regs[m] >> 16));
  }
}

template <int Count, bool Transpose>
void check_ldmatrix() {
  std::mt19937 rng(Count * 2 + Transpose);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  std::vector<float> in(kWarps * kWarpElements), out(32 * kWarps * 8, -1.0f);
  for (float& x : in) x = float(bits(rng));
  em::LaunchConfig config{.kernel_name = "ldmatrix",
                          .grid = {1},
                          .block = {32 * kWarps},
                          .shared_bytes = kWarps * kWarpElements * sizeof(std::uint16_t),
                          .buffers = {em::buffer_of(in.data(), in.size(), "in"),
                                      em::buffer_of(out.data(), out.size(), "out")}};
  const em::Report report =
      em::launch(&ldmatrix_kernel<Count, Transpose>, config, in.data(), out.data());
  REQUIRE_MESSAGE(report.clean(), report);
  // The ISA's layout: lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 of each matrix; with
  // .trans the matrix is read column-major, i.e. that element of its transpose.
  int mismatches = 0;
  for (int t = 0; t < 32 * kWarps; ++t) {
    const int lane = t % 32, warp = t / 32;
    for (int m = 0; m < Count; ++m) {
      for (int half = 0; half < 2; ++half) {
        const int r = lane / 4, c = 2 * (lane % 4) + half;
        const int row = Transpose ? c : r, col = Transpose ? r : c;
        const float expected =
            in[warp * kWarpElements + m * kMatrixStride + row * kRowStride + col];
        mismatches += out[t * 8 + 2 * m + half] != expected;
      }
    }
  }
  CHECK(mismatches == 0);
}

/// The tile-library pattern: a (16, 16) row-major A tile and a (16, 8) row-major B tile in
/// shared memory, A fragments from ldmatrix.x4, B fragments from ldmatrix.x2.trans, then mma.
__global__ void ldmatrix_mma_kernel(const flashjit::half_t* a, const flashjit::half_t* b,
                                    float* d) {
  const int lane = static_cast<int>(threadIdx.x);
  auto* a_smem = flashjit::dynamic_shared<std::uint16_t>();  // (16, 16)
  std::uint16_t* b_smem = a_smem + 256;                      // (16, 8)
  for (int i = lane; i < 256; i += 32) {
    flashjit::store_shared(a_smem, i, flashjit::to_half(flashjit::load_global(a, i)).bits);
    if (i < 128)
      flashjit::store_shared(b_smem, i, flashjit::to_half(flashjit::load_global(b, i)).bits);
  }
  __syncthreads();
  std::uint32_t a_regs[4], b_regs[2];
  em::ldmatrix(4, false, a_regs, a_smem + lane % 16 * 16 + lane / 16 * 8);
  em::ldmatrix(2, true, b_regs, b_smem + lane % 16 * 8);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  em::mma_m16n8k16(em::MmaInput::f16, acc, a_regs, b_regs, acc);
  for (int i = 0; i < 4;
       ++i) {  // C/D: element i at row lane/4 (+8 for i >= 2), column 2(lane%4) + i%2
    flashjit::store_global(d, (lane / 4 + (i >= 2 ? 8 : 0)) * 8 + 2 * (lane % 4) + i % 2, acc[i]);
  }
}

}  // namespace

TEST_CASE("ldmatrix m8n8 x1, x2, x4, with and without .trans, follows the ISA's layout") {
  check_ldmatrix<1, false>();
  check_ldmatrix<2, false>();
  check_ldmatrix<4, false>();
  check_ldmatrix<1, true>();
  check_ldmatrix<2, true>();
  check_ldmatrix<4, true>();
}

TEST_CASE("ldmatrix.x4 of A and ldmatrix.x2.trans of B give mma.sync's fragments") {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<flashjit::half_t> a(256), b(128);
  std::vector<float> d(128, std::nanf(""));
  for (auto& x : a) x = flashjit::to_half(normal(rng));
  for (auto& x : b) x = flashjit::to_half(normal(rng));
  em::LaunchConfig config{
      .kernel_name = "ldmatrix_mma",
      .grid = {1},
      .block = {32},
      .shared_bytes = (256 + 128) * 2,
      .buffers = {em::buffer_of(a.data(), a.size(), "a"), em::buffer_of(b.data(), b.size(), "b"),
                  em::buffer_of(d.data(), d.size(), "d")}};
  const em::Report report = em::launch(&ldmatrix_mma_kernel, config, a.data(), b.data(), d.data());
  REQUIRE_MESSAGE(report.clean(), report);
  int mismatches = 0;
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 8; ++n) {
      double expected = 0.0, magnitude = 0.0;
      for (int k = 0; k < 16; ++k) {
        const double product =
            double(flashjit::to_float(a[m * 16 + k])) * flashjit::to_float(b[k * 8 + n]);
        expected += product;
        magnitude += std::fabs(product);
      }
      mismatches += std::fabs(d[m * 8 + n] - expected) > 2e-6 * magnitude;
    }
  }
  CHECK(mismatches == 0);
}
