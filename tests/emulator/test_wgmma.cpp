// wgmma.mma_async on the emulator against a scalar matmul on random f16 and bf16 data, over
// every swizzle mode, K-major and MN-major A and B, N = 8..256, the SS and RS forms and
// scale-d on and off; and over fp8 e4m3 codes (m64nNk32, K-major). The shared-memory images, the
// descriptors (bit by bit), the RS A fragments and the accumulator layout are all built here from
// this file's own reading of the PTX ISA's wgmma layouts and descriptor format (CUTLASS's canonical
// layouts), as a kernel author would lay out whole tiles, rather than from the emulator's
// per-descriptor formulas.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"
#include "tile/wgmma.cuh"

namespace {

namespace em = flashjit::emulator;
constexpr int kThreads = 128;        // one warpgroup
constexpr int kM = 64, kDepth = 64;  // A is (kM, kDepth); four k16 steps
constexpr int kSteps = kDepth / 16;

/// Swizzle modes with their descriptor code (bits 62-63) and line width in 16-byte chunks.
struct Swizzle {
  const char* name;
  int code;
  int chunks;  // W: the swizzled line is 16·W bytes (none: one 16-byte core-matrix row)
};
constexpr Swizzle kSwizzles[] = {{"none", 0, 1}, {"32B", 3, 2}, {"64B", 2, 4}, {"128B", 1, 8}};

/// One operand tile in shared memory: `rows` along M (A) or N (B), kDepth along K, stored
/// whole the way a kernel stores it:
///  K-major, swizzled: blocks of 8W k-columns; in each, row r is a line of 16W bytes;
///  K-major, none: 8x8 core matrices (8 rows of 16 bytes), k-chunks of a row group adjacent;
///  MN-major, swizzled: blocks of 8W rows; in each, k-column c is a line of 16W bytes;
///  MN-major, none: 8x8 core matrices (8 k of 16 bytes), row groups of one k-chunk adjacent.
/// Swizzled lines of a 1024-byte aligned tile: 16-byte chunk j of the 128-byte segment at
/// address a moves to chunk j ^ ((a / 128) mod W).
struct Tile {
  Swizzle swizzle;
  bool mn_major;
  int rows;  // rounded up to whole blocks

  int line_bytes() const { return 16 * swizzle.chunks; }
  int bytes() const { return rows * kDepth * 2; }
  bool swizzled() const { return swizzle.code != 0; }

  int byte_of(int mn, int k) const {
    const int w = swizzle.chunks;
    int byte = 0;
    if (!mn_major && swizzled()) {
      byte = k / (8 * w) * rows * line_bytes() + mn * line_bytes() + k % (8 * w) * 2;
    } else if (!mn_major) {
      byte = (mn / 8 * (kDepth / 8) + k / 8) * 128 + mn % 8 * 16 + k % 8 * 2;
    } else if (swizzled()) {
      byte = mn / (8 * w) * kDepth * line_bytes() + k * line_bytes() + mn % (8 * w) * 2;
    } else {
      byte = (k / 8 * (rows / 8) + mn / 8) * 128 + k % 8 * 16 + mn % 8 * 2;
    }
    return swizzled() ? byte ^ ((byte >> 7) % w) << 4 : byte;
  }

  /// The descriptor of k-step `step` of a tile at shared offset `base` (1024-byte aligned),
  /// packed here bit by bit: start>>4 at 0, LBO>>4 at 16, SBO>>4 at 32, layout at 62.
  std::uint64_t descriptor(int base, int step) const {
    const int k0 = 16 * step, w = swizzle.chunks;
    int start = base, leading = 0, stride = 0;
    if (!mn_major && swizzled()) {
      start += k0 / (8 * w) * rows * line_bytes() + k0 % (8 * w) * 2;
      leading = 16;               // unused
      stride = 8 * line_bytes();  // next 8 rows
    } else if (!mn_major) {
      start += k0 / 8 * 128;
      leading = 128;              // next 8 k
      stride = kDepth / 8 * 128;  // next 8 rows
    } else if (swizzled()) {
      start += k0 * line_bytes();
      leading = kDepth * line_bytes();  // next 8W rows
      stride = 8 * line_bytes();        // next 8 k
    } else {
      start += k0 / 8 * (rows / 8) * 128;
      leading = rows / 8 * 128;  // next 8 k
      stride = 128;              // next 8 rows
    }
    return std::uint64_t(start >> 4) | std::uint64_t(leading >> 4) << 16 |
           std::uint64_t(stride >> 4) << 32 | std::uint64_t(swizzle.code) << 62;
  }
};

Tile make_tile(Swizzle swizzle, bool mn_major, int rows) {
  const int block = mn_major && swizzle.code != 0 ? 8 * swizzle.chunks : 8;
  return {swizzle, mn_major, (rows + block - 1) / block * block};
}

/// Accumulator register i of thread t: warp w = t / 32 holds rows 16w..16w+15, as N/8 blocks
/// of 8 columns, each the m16n8 C fragment (4 registers): element e at row g (+8 for e >= 2),
/// column 2·(lane % 4) + e % 2 with g = lane / 4; register i is element i % 4 of block i / 4.
struct Spot {
  int row, col;
};
Spot accumulator_spot(int t, int i) {
  const int lane = t % 32, block = i / 4, e = i % 4;
  return {16 * (t / 32) + lane / 4 + (e >= 2 ? 8 : 0), 8 * block + 2 * (lane % 4) + e % 2};
}
/// RS A register r (two elements, low first) of lane `lane` in its warp's 16 rows: the mma.sync
/// m16n8k16 A fragment (rows g, g+8, g, g+8; columns 2t.., 2t.., 2t+8.., 2t+8..).
Spot a_fragment_spot(int lane, int r, int half) {
  const int row_offset[4] = {0, 8, 0, 8}, col_offset[4] = {0, 0, 8, 8};
  return {lane / 4 + row_offset[r], 2 * (lane % 4) + col_offset[r] + half};
}

struct Case {
  std::uint64_t a_descriptor[kSteps], b_descriptor[kSteps];
  int n, a_elements, b_elements, b_offset;  // shared elements, B's start
  bool scale_d, trans_a, trans_b, register_a;
};

/// The case of A's tile at shared offset 0 and B's at the next 1024-byte boundary (16-bit
/// elements of both images), N = n; the flags off.
Case tiles_case(const Tile& a_tile, const Tile& b_tile, int n) {
  const int b_base = (a_tile.bytes() + 1023) / 1024 * 1024;
  Case p{};
  for (int s = 0; s < kSteps; ++s) {
    p.a_descriptor[s] = a_tile.descriptor(0, s);
    p.b_descriptor[s] = b_tile.descriptor(b_base, s);
  }
  p.n = n;
  p.a_elements = a_tile.bytes() / 2;
  p.b_elements = b_tile.bytes() / 2;
  p.b_offset = b_base / 2;
  return p;
}

/// Shared bytes a launch of `p` needs: both tiles.
std::size_t shared_bytes_of(const Case& p) {
  return static_cast<std::size_t>(2 * (p.b_offset + p.b_elements));
}

/// Thread t's accumulators from C (kM, n), and back to D.
void load_accumulators(float* acc, const float* c, int n, int t) {
  for (int i = 0; i < n / 2; ++i) {
    acc[i] = flashjit::load_global(c, accumulator_spot(t, i).row * n + accumulator_spot(t, i).col);
  }
}
void store_accumulators(float* d, const float* acc, int n, int t) {
  for (int i = 0; i < n / 2; ++i) {
    flashjit::store_global(d, accumulator_spot(t, i).row * n + accumulator_spot(t, i).col, acc[i]);
  }
}

template <class T>
std::uint32_t bits_of(const T* a, int index) {
  return flashjit::from_float<T>(flashjit::load_global(a, index)).bits;
}

/// The warpgroup copies both images to shared memory, loads C into its accumulators and runs
/// four chained k16 steps (scale-d on after the first), then stores D (kM, n).
template <class T>
__global__ void wgmma_kernel(Case p, const T* a_image, const T* b_image, const T* a, const float* c,
                             float* d) {
  const int t = static_cast<int>(threadIdx.x);
  T* shared = flashjit::dynamic_shared<T>();
  for (int i = t; i < p.a_elements; i += kThreads) {
    flashjit::store_shared(shared, i, flashjit::from_float<T>(flashjit::load_global(a_image, i)));
  }
  for (int i = t; i < p.b_elements; i += kThreads) {
    flashjit::store_shared(shared, p.b_offset + i,
                           flashjit::from_float<T>(flashjit::load_global(b_image, i)));
  }
  flashjit::emulator::fence_proxy_async_shared();  // generic writes, read by wgmma
  __syncthreads();
  float acc[128];  // (n / 2)
  load_accumulators(acc, c, p.n, t);
  constexpr auto input =
      std::is_same_v<T, flashjit::half_t> ? em::MmaInput::f16 : em::MmaInput::bf16;
  std::uint32_t regs[kSteps][4];  // the RS form's A, every step's written before the fence
  for (int step = 0; step < kSteps && p.register_a; ++step) {
    for (int r = 0; r < 4; ++r) {
      const Spot lo = a_fragment_spot(t % 32, r, 0), hi = a_fragment_spot(t % 32, r, 1);
      const int row0 = 16 * (t / 32), k0 = 16 * step;
      regs[step][r] = bits_of(a, (row0 + lo.row) * kDepth + k0 + lo.col) |
                      bits_of(a, (row0 + hi.row) * kDepth + k0 + hi.col) << 16;
    }
  }
  em::wgmma_fence();
  for (int step = 0; step < kSteps; ++step) {
    const bool scale_d = step > 0 || p.scale_d;
    if (p.register_a) {
      em::wgmma_rs(input, p.n, acc, regs[step], p.b_descriptor[step], scale_d, 1, 1, p.trans_b);
    } else {
      em::wgmma_ss(input, p.n, acc, p.a_descriptor[step], p.b_descriptor[step], scale_d, 1, 1,
                   p.trans_a, p.trans_b);
    }
  }
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
  store_accumulators(d, acc, p.n, t);
}

struct Variant {
  Swizzle swizzle;
  bool trans_a, trans_b, register_a, scale_d;
  int n;
};

/// Runs one variant on random data; returns the number of wrong elements of D.
template <class T>
int mismatches(const Variant& v, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int n = v.n;
  std::vector<T> a(kM * kDepth), b_t(static_cast<std::size_t>(n * kDepth));  // A (m,k), Bᵀ (n,k)
  std::vector<float> c(static_cast<std::size_t>(kM * n)), d(c.size(), std::nanf(""));
  for (T& x : a) x = flashjit::from_float<T>(normal(rng));
  for (T& x : b_t) x = flashjit::from_float<T>(normal(rng));
  for (float& x : c) x = normal(rng);
  const Tile a_tile = make_tile(v.swizzle, v.trans_a, kM),
             b_tile = make_tile(v.swizzle, v.trans_b, n);
  std::vector<T> a_image(static_cast<std::size_t>(a_tile.bytes() / 2),
                         flashjit::from_float<T>(0.0f));
  std::vector<T> b_image(static_cast<std::size_t>(b_tile.bytes() / 2),
                         flashjit::from_float<T>(0.0f));
  for (int k = 0; k < kDepth; ++k) {
    for (int m = 0; m < kM; ++m)
      a_image[static_cast<std::size_t>(a_tile.byte_of(m, k) / 2)] =
          a[static_cast<std::size_t>(m * kDepth + k)];
    for (int j = 0; j < n; ++j)
      b_image[static_cast<std::size_t>(b_tile.byte_of(j, k) / 2)] =
          b_t[static_cast<std::size_t>(j * kDepth + k)];
  }
  Case p = tiles_case(a_tile, b_tile, n);
  p.scale_d = v.scale_d;
  p.trans_a = v.trans_a;
  p.trans_b = v.trans_b;
  p.register_a = v.register_a;
  em::LaunchConfig config{
      .kernel_name = "wgmma",
      .grid = {1},
      .block = {kThreads},
      .shared_bytes = shared_bytes_of(p),
      .buffers = {em::buffer_of(a_image.data(), a_image.size(), "a_image"),
                  em::buffer_of(b_image.data(), b_image.size(), "b_image"),
                  em::buffer_of(a.data(), a.size(), "a"), em::buffer_of(c.data(), c.size(), "c"),
                  em::buffer_of(d.data(), d.size(), "d")}};
  config.memory_model = em::ModelledGpu{};
  const em::Report report = em::launch(&wgmma_kernel<T>, config, p, a_image.data(), b_image.data(),
                                       a.data(), c.data(), d.data());
  REQUIRE_MESSAGE(report.clean(), report);
  CHECK(report.work.tensor_flops == std::uint64_t(2) * kM * static_cast<std::uint64_t>(n) * kDepth);
  // The memory model reads the shared operands a core matrix (8 x 16 bytes) at a time: 16 of
  // A's (64 x 16) and n / 4 of B's a k16 step, each in one wavefront in every legal layout.
  const std::uint64_t cores = std::uint64_t(kSteps) * ((v.register_a ? 0 : 16) + n / 4);
  CHECK(report.memory.wgmma_core_matrices == cores);
  CHECK(report.memory.wgmma_wavefronts == cores);
  int wrong = 0;
  for (int m = 0; m < kM; ++m) {
    for (int j = 0; j < n; ++j) {
      double expected = v.scale_d ? c[static_cast<std::size_t>(m * n + j)] : 0.0;
      double magnitude = std::fabs(expected);
      for (int k = 0; k < kDepth; ++k) {
        const double product =
            double(flashjit::to_float(a[static_cast<std::size_t>(m * kDepth + k)])) *
            flashjit::to_float(b_t[static_cast<std::size_t>(j * kDepth + k)]);
        expected += product;
        magnitude += std::fabs(product);
      }
      const double actual = d[static_cast<std::size_t>(m * n + j)];
      if (!(std::fabs(actual - expected) <= 1e-5 * magnitude + 1e-6)) {
        if (++wrong <= 4) MESSAGE("d[", m, "][", j, "] = ", actual, " != ", expected);
      }
    }
  }
  return wrong;
}

}  // namespace

TEST_CASE_TEMPLATE("wgmma m64nNk16 equals A B (+ C) for every swizzle, major-ness, N and form", T,
                   flashjit::half_t, flashjit::bfloat16_t) {
  unsigned seed = 1;
  for (const Swizzle& swizzle : kSwizzles) {
    for (const bool register_a : {false, true}) {
      for (const bool trans_a : {false, true}) {
        if (register_a && trans_a) continue;  // RS: A has no layout in shared memory
        for (const bool trans_b : {false, true}) {
          for (int n = 8; n <= 256; n += 8) {
            const Variant v{swizzle, trans_a, trans_b, register_a, (n / 8) % 2 == 1, n};
            CAPTURE(swizzle.name);
            CAPTURE(register_a);
            CAPTURE(trans_a);
            CAPTURE(trans_b);
            CAPTURE(n);
            CAPTURE(v.scale_d);
            CHECK(mismatches<T>(v, seed++) == 0);
          }
        }
      }
    }
  }
}

namespace {

/// m64nNk32 over e4m3: the K-major tiles above with two codes in each 16-bit element (k 2e and
/// 2e + 1 of element e, the low byte first), images and RS registers of those pairs (as floats,
/// exact to 65535), kDepth elements = 2 kDepth codes along k, four k32 steps.
__global__ void wgmma_e4m3_kernel(Case p, const float* a_image, const float* b_image,
                                  const float* a_pairs, const float* c, float* d) {
  const int t = static_cast<int>(threadIdx.x);
  auto* shared = flashjit::dynamic_shared<std::uint16_t>();
  for (int i = t; i < p.a_elements; i += kThreads) {
    flashjit::store_shared(shared, i,
                           static_cast<std::uint16_t>(flashjit::load_global(a_image, i)));
  }
  for (int i = t; i < p.b_elements; i += kThreads) {
    flashjit::store_shared(shared, p.b_offset + i,
                           static_cast<std::uint16_t>(flashjit::load_global(b_image, i)));
  }
  flashjit::emulator::fence_proxy_async_shared();
  __syncthreads();
  float acc[128];
  load_accumulators(acc, c, p.n, t);
  std::uint32_t regs[kSteps][4];
  for (int step = 0; step < kSteps && p.register_a; ++step) {
    for (int r = 0; r < 4; ++r) {
      const Spot lo = a_fragment_spot(t % 32, r, 0), hi = a_fragment_spot(t % 32, r, 1);
      const int row0 = 16 * (t / 32), k0 = 16 * step;
      const auto pair = [&](Spot s) {
        return static_cast<std::uint32_t>(
            flashjit::load_global(a_pairs, (row0 + s.row) * kDepth + k0 + s.col));
      };
      regs[step][r] = pair(lo) | pair(hi) << 16;
    }
  }
  em::wgmma_fence();
  for (int step = 0; step < kSteps; ++step) {
    if (p.register_a) {
      em::wgmma_rs(em::MmaInput::e4m3, p.n, acc, regs[step], p.b_descriptor[step], true, 1, 1,
                   p.trans_b);
    } else {
      em::wgmma_ss(em::MmaInput::e4m3, p.n, acc, p.a_descriptor[step], p.b_descriptor[step], true,
                   1, 1, p.trans_a, p.trans_b);
    }
  }
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
  store_accumulators(d, acc, p.n, t);
}

/// Random codes (no NaN), A (64, 2 kDepth) and Bᵀ (n, 2 kDepth); returns D's wrong elements.
/// `trans_b` (which fp8 lacks) must be reported instead.
int e4m3_mismatches(Swizzle swizzle, bool register_a, int n, unsigned seed, bool trans_b = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(0, 255);
  const auto codes = [&](int count) {
    std::vector<int> v(static_cast<std::size_t>(count));
    for (int& x : v) x = code(rng) & 0xF7;  // no NaN (S.1111.111)
    return v;
  };
  const std::vector<int> a = codes(kM * 2 * kDepth), b_t = codes(n * 2 * kDepth);
  std::vector<float> c(static_cast<std::size_t>(kM * n)), d(c.size(), std::nanf(""));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : c) x = normal(rng);
  const Tile a_tile = make_tile(swizzle, false, kM), b_tile = make_tile(swizzle, false, n);
  std::vector<float> a_image(static_cast<std::size_t>(a_tile.bytes() / 2), 0.0f);
  std::vector<float> b_image(static_cast<std::size_t>(b_tile.bytes() / 2), 0.0f);
  std::vector<float> a_pairs(static_cast<std::size_t>(kM * kDepth));
  const auto pair = [](const std::vector<int>& x, int row, int e) {
    return static_cast<float>(x[static_cast<std::size_t>(row * 2 * kDepth + 2 * e)] |
                              x[static_cast<std::size_t>(row * 2 * kDepth + 2 * e + 1)] << 8);
  };
  for (int e = 0; e < kDepth; ++e) {
    for (int m = 0; m < kM; ++m) {
      a_image[static_cast<std::size_t>(a_tile.byte_of(m, e) / 2)] = pair(a, m, e);
      a_pairs[static_cast<std::size_t>(m * kDepth + e)] = pair(a, m, e);
    }
    for (int j = 0; j < n; ++j)
      b_image[static_cast<std::size_t>(b_tile.byte_of(j, e) / 2)] = pair(b_t, j, e);
  }
  Case p = tiles_case(a_tile, b_tile, n);
  p.register_a = register_a;
  p.trans_b = trans_b;
  em::LaunchConfig config{
      .kernel_name = "wgmma_e4m3",
      .grid = {1},
      .block = {kThreads},
      .shared_bytes = shared_bytes_of(p),
      .buffers = {em::buffer_of(a_image.data(), a_image.size(), "a_image"),
                  em::buffer_of(b_image.data(), b_image.size(), "b_image"),
                  em::buffer_of(a_pairs.data(), a_pairs.size(), "a_pairs"),
                  em::buffer_of(c.data(), c.size(), "c"), em::buffer_of(d.data(), d.size(), "d")}};
  const em::Report report = em::launch(&wgmma_e4m3_kernel, config, p, a_image.data(),
                                       b_image.data(), a_pairs.data(), c.data(), d.data());
  if (trans_b) {
    CHECK_MESSAGE(report.describe().find("K-major only") != std::string::npos, report);
    return 0;
  }
  REQUIRE_MESSAGE(report.clean(), report);
  CHECK(report.work.tensor_flops ==
        std::uint64_t(2) * kM * static_cast<std::uint64_t>(n) * 2 * kDepth);
  const auto value = [](int bits) { return double(flashjit::float_from_e4m3(unsigned(bits))); };
  int wrong = 0;
  for (int m = 0; m < kM; ++m) {
    for (int j = 0; j < n; ++j) {
      double expected = c[static_cast<std::size_t>(m * n + j)], magnitude = std::fabs(expected);
      for (int k = 0; k < 2 * kDepth; ++k) {
        const double product = value(a[static_cast<std::size_t>(m * 2 * kDepth + k)]) *
                               value(b_t[static_cast<std::size_t>(j * 2 * kDepth + k)]);
        expected += product;
        magnitude += std::fabs(product);
      }
      const double actual = d[static_cast<std::size_t>(m * n + j)];
      if (!(std::fabs(actual - expected) <= 1e-5 * magnitude + 1e-6) && ++wrong <= 4) {
        MESSAGE("d[", m, "][", j, "] = ", actual, " != ", expected);
      }
    }
  }
  return wrong;
}

}  // namespace

TEST_CASE("wgmma m64nNk32 over e4m3 equals A B + C, K-major, every swizzle, SS and RS") {
  unsigned seed = 100;
  for (const Swizzle& swizzle : kSwizzles) {
    for (const bool register_a : {false, true}) {
      for (const int n : {8, 64, 136, 256}) {
        CAPTURE(swizzle.name);
        CAPTURE(register_a);
        CAPTURE(n);
        CHECK(e4m3_mismatches(swizzle, register_a, n, seed++) == 0);
      }
    }
  }
  e4m3_mismatches(kSwizzles[3], false, 64, seed, /*trans_b=*/true);  // reported, not run
}

namespace {

/// The tile library's entry points (tile/wgmma.cuh) on the emulator: A (64 x 64) and B
/// (N x 64) K-major with the 128B swizzle, descriptors from make_descriptor, k-steps by moving
/// the start 32 bytes along the swizzled rows. `RegisterA`: A from FragmentA registers instead.
template <int N, bool RegisterA>
__global__ void tile_wgmma_kernel(const flashjit::bfloat16_t* a_image,
                                  const flashjit::bfloat16_t* b_image,
                                  const flashjit::bfloat16_t* a, float* d) {
  using flashjit::bfloat16_t;
  const int t = static_cast<int>(threadIdx.x);
  auto* shared = flashjit::dynamic_shared<bfloat16_t>();
  bfloat16_t* a_smem = shared;                // (64, 64), 8 KiB
  bfloat16_t* b_smem = shared + kM * kDepth;  // (N, 64)
  for (int i = t; i < kM * kDepth; i += kThreads) {
    flashjit::store_shared(a_smem, i,
                           flashjit::from_float<bfloat16_t>(flashjit::load_global(a_image, i)));
  }
  for (int i = t; i < N * kDepth; i += kThreads) {
    flashjit::store_shared(b_smem, i,
                           flashjit::from_float<bfloat16_t>(flashjit::load_global(b_image, i)));
  }
  flashjit::emulator::fence_proxy_async_shared();  // generic writes, read by wgmma
  __syncthreads();
  float acc[N / 2] = {};
  flashjit::FragmentA fragments[kSteps];  // the RS form's A, every step's written before the fence
  for (int step = 0; step < kSteps && RegisterA; ++step) {
    for (int r = 0; r < 4; ++r) {
      const Spot lo = a_fragment_spot(t % 32, r, 0), hi = a_fragment_spot(t % 32, r, 1);
      const int row0 = 16 * (t / 32), k0 = 16 * step;
      fragments[step].regs[r] = bits_of(a, (row0 + lo.row) * kDepth + k0 + lo.col) |
                                bits_of(a, (row0 + hi.row) * kDepth + k0 + hi.col) << 16;
    }
  }
  flashjit::wgmma_fence();
  for (int step = 0; step < kSteps; ++step) {
    const auto b_desc = flashjit::make_descriptor(b_smem + 16 * step, 16, 1024,
                                                  flashjit::WgmmaLayout::swizzle_128b);
    if constexpr (RegisterA) {
      flashjit::wgmma_rs<bfloat16_t, N>(acc, fragments[step], b_desc, step > 0);
    } else {
      const auto a_desc = flashjit::make_descriptor(a_smem + 16 * step, 16, 1024,
                                                    flashjit::WgmmaLayout::swizzle_128b);
      flashjit::wgmma_ss<bfloat16_t, N>(acc, a_desc, b_desc, step > 0);
    }
  }
  flashjit::wgmma_commit_group();
  flashjit::wgmma_wait_group<0>();
  for (int i = 0; i < N / 2; ++i) {
    flashjit::store_global(d, accumulator_spot(t, i).row * N + accumulator_spot(t, i).col, acc[i]);
  }
}

template <int N, bool RegisterA>
void check_tile_wgmma() {
  using flashjit::bfloat16_t;
  std::mt19937 rng(N + RegisterA);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<bfloat16_t> a(kM * kDepth), b_t(N * kDepth);
  for (auto& x : a) x = flashjit::from_float<bfloat16_t>(normal(rng));
  for (auto& x : b_t) x = flashjit::from_float<bfloat16_t>(normal(rng));
  const Tile a_tile = make_tile(kSwizzles[3], false, kM),
             b_tile = make_tile(kSwizzles[3], false, N);
  std::vector<bfloat16_t> a_image(a.size()), b_image(b_t.size());
  for (int k = 0; k < kDepth; ++k) {
    for (int m = 0; m < kM; ++m)
      a_image[static_cast<std::size_t>(a_tile.byte_of(m, k) / 2)] =
          a[static_cast<std::size_t>(m * kDepth + k)];
    for (int j = 0; j < N; ++j)
      b_image[static_cast<std::size_t>(b_tile.byte_of(j, k) / 2)] =
          b_t[static_cast<std::size_t>(j * kDepth + k)];
  }
  std::vector<float> d(kM * N, std::nanf(""));
  em::LaunchConfig config{
      .kernel_name = "tile_wgmma",
      .grid = {1},
      .block = {kThreads},
      .shared_bytes = (kM + N) * kDepth * 2,
      .buffers = {em::buffer_of(a_image.data(), a_image.size(), "a_image"),
                  em::buffer_of(b_image.data(), b_image.size(), "b_image"),
                  em::buffer_of(a.data(), a.size(), "a"), em::buffer_of(d.data(), d.size(), "d")}};
  const em::Report report = em::launch(&tile_wgmma_kernel<N, RegisterA>, config, a_image.data(),
                                       b_image.data(), a.data(), d.data());
  REQUIRE_MESSAGE(report.clean(), report);
  int wrong = 0;
  for (int m = 0; m < kM; ++m) {
    for (int j = 0; j < N; ++j) {
      double expected = 0.0, magnitude = 0.0;
      for (int k = 0; k < kDepth; ++k) {
        const double product =
            double(flashjit::to_float(a[static_cast<std::size_t>(m * kDepth + k)])) *
            flashjit::to_float(b_t[static_cast<std::size_t>(j * kDepth + k)]);
        expected += product;
        magnitude += std::fabs(product);
      }
      wrong +=
          std::fabs(d[static_cast<std::size_t>(m * N + j)] - expected) <= 1e-5 * magnitude + 1e-6
              ? 0
              : 1;
    }
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("tile/wgmma.cuh's entry points run on the emulator (SS N = 64, RS N = 128, bf16)") {
  check_tile_wgmma<64, false>();
  check_tile_wgmma<128, true>();
}
