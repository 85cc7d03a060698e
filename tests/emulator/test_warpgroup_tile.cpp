// The Hopper forward's building blocks (tile/warpgroup_tile.cuh) on the emulator: tiles loaded
// with cp.async into wgmma's interleaved layout, S = Q Kᵀ with both operands from shared memory
// and O = P V with P from registers and V as stored, against scalar products of the same
// inputs, for one and two warpgroups (the second's rows start at 64), f16 and bf16, N (keys)
// 64 and 128, head dims 64 and 128.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"
#include "tile/warpgroup_tile.cuh"

namespace {

namespace em = flashjit::emulator;
using flashjit::acc_tile;
using flashjit::core_matrix_tile;

template <typename T, int Keys, int HeadDim, int Warpgroups>
struct Shapes {
  static constexpr int kThreads = 128 * Warpgroups;
  static constexpr int kRows = 64 * Warpgroups;  // query rows
  using QTile = core_matrix_tile<T, kRows, HeadDim>;
  using KVTile = core_matrix_tile<T, Keys, HeadDim>;
  static constexpr int kSharedBytes = QTile::kBytes + 2 * KVTile::kBytes;
};

/// s_out (rows, Keys) = Q Kᵀ and o_out (rows, HeadDim) = P V with P = S rounded to T; Q, K and
/// V row-major.
template <typename T, int Keys, int HeadDim, int Warpgroups>
FJ_GLOBAL void products_kernel(const T* q, const T* k, const T* v, float* s_out, float* o_out) {
  using S = Shapes<T, Keys, HeadDim, Warpgroups>;
  unsigned char* base = flashjit::dynamic_shared<unsigned char>();
  const typename S::QTile q_tile{reinterpret_cast<T*>(base)};  // (kRows, HeadDim)
  const typename S::KVTile k_tile{reinterpret_cast<T*>(base + S::QTile::kBytes)};  // (Keys, D)
  const typename S::KVTile v_tile{
      reinterpret_cast<T*>(base + S::QTile::kBytes + S::KVTile::kBytes)};  // (Keys, HeadDim)
  const int thread = static_cast<int>(threadIdx.x), lane = thread % 32;
  flashjit::load_core_matrix_tile_async<S::kThreads>(q_tile, q, HeadDim, S::kRows, HeadDim, thread);
  flashjit::load_core_matrix_tile_async<S::kThreads>(k_tile, k, HeadDim, Keys, HeadDim, thread);
  flashjit::load_core_matrix_tile_async<S::kThreads>(v_tile, v, HeadDim, Keys, HeadDim, thread);
  flashjit::cp_async_commit();
  flashjit::cp_async_wait<0>();
  flashjit::fence_proxy_async();  // cp.async wrote through the generic proxy; wgmma reads async
  __syncthreads();
  const int warp_row0 = thread / 32 * 16;  // this warp's first query row
  acc_tile<16, Keys> s;                    // (16, Keys): this warp's rows of S
  flashjit::warpgroup_abt(s, q_tile, thread / 128 * 64, k_tile);  // S = Q Kᵀ
  flashjit::for_each_element(s, lane, [&](int row, int col, float& x) {
    flashjit::store_global(s_out, (warp_row0 + row) * Keys + col, x);
  });
  acc_tile<16, HeadDim> o;  // (16, HeadDim)
  flashjit::fill(o, 0.0f);
  flashjit::warpgroup_ab(o, flashjit::to_operand<T>(s), v_tile);  // O += P V
  flashjit::for_each_element(o, lane, [&](int row, int col, float& x) {
    flashjit::store_global(o_out, (warp_row0 + row) * HeadDim + col, x);
  });
}

/// Elements of `actual` off `expected` by more than fp32 summation can explain.
int mismatches(const std::vector<float>& actual, const std::vector<double>& expected,
               const std::vector<double>& magnitude) {
  int wrong = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (!(std::fabs(actual[i] - expected[i]) <= 1e-5 * magnitude[i] + 1e-6)) {
      if (++wrong <= 4) MESSAGE("element ", i, ": ", actual[i], " != ", expected[i]);
    }
  }
  return wrong;
}

template <typename T, int Keys, int HeadDim, int Warpgroups>
void check_products() {
  using S = Shapes<T, Keys, HeadDim, Warpgroups>;
  CAPTURE(Keys);
  CAPTURE(HeadDim);
  CAPTURE(Warpgroups);
  std::mt19937 rng(Keys * 7 + HeadDim + Warpgroups);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<T> q(S::kRows * HeadDim), k(Keys * HeadDim), v(Keys * HeadDim);
  for (std::vector<T>* x : {&q, &k, &v}) {
    for (T& e : *x) e = flashjit::from_float<T>(normal(rng));
  }
  std::vector<float> s(S::kRows * Keys, std::nanf("")), o(S::kRows * HeadDim, std::nanf(""));
  em::LaunchConfig config{
      .kernel_name = "warpgroup_products",
      .grid = {1},
      .block = {S::kThreads},
      .shared_bytes = S::kSharedBytes,
      .buffers = {em::buffer_of(q.data(), q.size(), "q"), em::buffer_of(k.data(), k.size(), "k"),
                  em::buffer_of(v.data(), v.size(), "v"), em::buffer_of(s.data(), s.size(), "s"),
                  em::buffer_of(o.data(), o.size(), "o")}};
  const em::Report report = em::launch(&products_kernel<T, Keys, HeadDim, Warpgroups>, config,
                                       q.data(), k.data(), v.data(), s.data(), o.data());
  REQUIRE_MESSAGE(report.clean(), report);
  // Both products on the tensor cores, none through ldmatrix: shared reads are the operands'.
  CHECK(report.work.tensor_flops ==
        std::uint64_t(2) * 2 * S::kRows * std::uint64_t(Keys) * HeadDim);

  auto f = [](T x) { return double(flashjit::to_float(x)); };
  std::vector<double> s_expected(s.size()), s_magnitude(s.size());
  for (int i = 0; i < S::kRows; ++i) {
    for (int j = 0; j < Keys; ++j) {
      double sum = 0, magnitude = 0;
      for (int d = 0; d < HeadDim; ++d) {
        const double product = f(q[i * HeadDim + d]) * f(k[j * HeadDim + d]);
        sum += product;
        magnitude += std::fabs(product);
      }
      s_expected[i * Keys + j] = sum;
      s_magnitude[i * Keys + j] = magnitude;
    }
  }
  CHECK(mismatches(s, s_expected, s_magnitude) == 0);
  // P as the kernel rounded it: the S it computed, in T.
  std::vector<double> o_expected(o.size()), o_magnitude(o.size());
  for (int i = 0; i < S::kRows; ++i) {
    for (int d = 0; d < HeadDim; ++d) {
      double sum = 0, magnitude = 0;
      for (int j = 0; j < Keys; ++j) {
        const double product = f(flashjit::from_float<T>(s[i * Keys + j])) * f(v[j * HeadDim + d]);
        sum += product;
        magnitude += std::fabs(product);
      }
      o_expected[i * HeadDim + d] = sum;
      o_magnitude[i * HeadDim + d] = magnitude;
    }
  }
  CHECK(mismatches(o, o_expected, o_magnitude) == 0);
}

}  // namespace

TEST_CASE_TEMPLATE("warpgroup products: S = Q Kᵀ from shared tiles, O = P V with P in registers", T,
                   flashjit::half_t, flashjit::bfloat16_t) {
  check_products<T, 64, 64, 1>();
  check_products<T, 128, 64, 1>();
  check_products<T, 64, 128, 2>();
  check_products<T, 128, 128, 1>();
}
