// Every primitive the templates use, on the emulator, against a scalar model on random data:
// shuffles, votes, warp_allreduce, the fp16/bf16 conversions, the online-softmax RowStats, and
// the fast divider's quotients against integer division.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/fast_divider.cuh"
#include "tile/memory.cuh"
#include "tile/online_softmax.cuh"
#include "tile/warp.cuh"

namespace {

namespace em = flashjit::emulator;
using flashjit::kFullWarp;
constexpr int kThreads = 64;  // two warps, so lanes and warps are both exercised

__global__ void shuffle_kernel(const float* in, float* out, int operand) {
  const int t = static_cast<int>(threadIdx.x);
  const float value = flashjit::load_global(in, t);
  flashjit::store_global(out, 3 * t + 0, __shfl_xor_sync(kFullWarp, value, operand));
  flashjit::store_global(out, 3 * t + 1, __shfl_sync(kFullWarp, value, operand));
  flashjit::store_global(out, 3 * t + 2, __shfl_down_sync(kFullWarp, value, unsigned(operand)));
}

__global__ void vote_kernel(const float* in, float* out, int) {
  const int t = static_cast<int>(threadIdx.x);
  const int predicate = flashjit::load_global(in, t) > 0.0f;
  const unsigned ballot = __ballot_sync(kFullWarp, predicate);
  flashjit::store_global(out, 4 * t + 0, float(ballot & 0xffffu));  // halves: exact in fp32
  flashjit::store_global(out, 4 * t + 1, float(ballot >> 16));
  flashjit::store_global(out, 4 * t + 2, float(__any_sync(kFullWarp, predicate)));
  flashjit::store_global(out, 4 * t + 3, float(__all_sync(kFullWarp, predicate)));
}

__global__ void allreduce_kernel(const float* in, float* out, int) {
  const int t = static_cast<int>(threadIdx.x);
  const float value = flashjit::load_global(in, t);
  flashjit::store_global(out, 2 * t,
                         flashjit::warp_allreduce(value, [](float a, float b) { return a + b; }));
  flashjit::store_global(out, 2 * t + 1, flashjit::warp_allreduce(value, [](float a, float b) {
                           return std::max(a, b);
                         }));
}

/// Runs `kernel(in, out, operand)` on one block of kThreads; `out` holds `per_thread` values each.
std::vector<float> run(void (*kernel)(const float*, float*, int), const std::vector<float>& in,
                       int per_thread, int operand) {
  std::vector<float> out(static_cast<std::size_t>(kThreads * per_thread), std::nanf(""));
  em::LaunchConfig config{.kernel_name = "primitive",
                          .grid = {1},
                          .block = {kThreads},
                          .buffers = {em::buffer_of(in.data(), in.size(), "in"),
                                      em::buffer_of(out.data(), out.size(), "out")}};
  const em::Report report = em::launch(kernel, config, in.data(), out.data(), operand);
  CHECK_MESSAGE(report.clean(), report);
  return out;
}

std::vector<float> random_values(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(kThreads);
  for (float& v : values) v = normal(rng);
  return values;
}

}  // namespace

TEST_CASE("shuffles match the scalar model for every operand") {
  const std::vector<float> in = random_values(1);
  for (int operand = 0; operand < 32; ++operand) {
    CAPTURE(operand);
    const std::vector<float> out = run(shuffle_kernel, in, 3, operand);
    for (int t = 0; t < kThreads; ++t) {
      const int lane = t % 32, warp_base = t - lane;
      CHECK(out[3 * t + 0] == in[warp_base + (lane ^ operand)]);
      CHECK(out[3 * t + 1] == in[warp_base + operand]);
      CHECK(out[3 * t + 2] == in[lane + operand < 32 ? t + operand : t]);
    }
  }
}

TEST_CASE("votes match the scalar model") {
  for (unsigned seed = 0; seed < 4; ++seed) {
    std::vector<float> in = random_values(seed);
    if (seed == 2) std::fill(in.begin(), in.begin() + 32, 1.0f);  // all true in warp 0
    if (seed == 3) std::fill(in.begin() + 32, in.end(), -1.0f);   // all false in warp 1
    const std::vector<float> out = run(vote_kernel, in, 4, 0);
    for (int warp = 0; warp < kThreads / 32; ++warp) {
      unsigned ballot = 0;
      for (int lane = 0; lane < 32; ++lane)
        ballot |= (in[warp * 32 + lane] > 0.0f ? 1u : 0u) << lane;
      for (int t = warp * 32; t < warp * 32 + 32; ++t) {
        CHECK(out[4 * t + 0] == float(ballot & 0xffffu));
        CHECK(out[4 * t + 1] == float(ballot >> 16));
        CHECK(out[4 * t + 2] == float(ballot != 0));
        CHECK(out[4 * t + 3] == float(ballot == kFullWarp));
      }
    }
  }
}

TEST_CASE("warp_allreduce gives every lane the warp's sum and max") {
  const std::vector<float> in = random_values(7);
  const std::vector<float> out = run(allreduce_kernel, in, 2, 0);
  for (int warp = 0; warp < kThreads / 32; ++warp) {
    const auto first = in.begin() + warp * 32;
    double sum = 0.0;
    for (auto it = first; it != first + 32; ++it) sum += *it;
    const float max = *std::max_element(first, first + 32);
    for (int t = warp * 32; t < warp * 32 + 32; ++t) {
      CHECK(out[2 * t] == doctest::Approx(sum).epsilon(1e-5));
      CHECK(out[2 * t] == out[2 * warp * 32]);  // bit-identical on every lane
      CHECK(out[2 * t + 1] == max);
    }
  }
}

TEST_CASE("fp16 and bf16 conversions round-trip and round to nearest even") {
  int half_mismatches = 0, bfloat_mismatches = 0;  // every non-NaN bit pattern
  for (unsigned bits = 0; bits < 0x10000u; ++bits) {
    const auto h = flashjit::half_t{static_cast<unsigned short>(bits)};
    const auto b = flashjit::bfloat16_t{static_cast<unsigned short>(bits)};
    if (!std::isnan(flashjit::to_float(h)))
      half_mismatches += flashjit::to_half(flashjit::to_float(h)).bits != bits;
    if (!std::isnan(flashjit::to_float(b)))
      bfloat_mismatches += flashjit::to_bfloat16(flashjit::to_float(b)).bits != bits;
  }
  CHECK(half_mismatches == 0);
  CHECK(bfloat_mismatches == 0);
  CHECK(flashjit::to_half(1.0f).bits == 0x3c00);
  CHECK(flashjit::to_half(65504.0f).bits == 0x7bff);                      // largest finite
  CHECK(flashjit::to_half(65520.0f).bits == 0x7c00);                      // rounds to +inf
  CHECK(flashjit::to_half(std::ldexp(1.0f, -24)).bits == 0x0001);         // smallest subnormal
  CHECK(flashjit::to_half(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);  // tie to even
  CHECK(flashjit::to_bfloat16(1.0f).bits == 0x3f80);
  CHECK(flashjit::to_bfloat16(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80);  // tie to even
  CHECK(std::isnan(flashjit::to_float(flashjit::to_bfloat16(std::nanf("")))));
  CHECK(std::isnan(flashjit::to_float(flashjit::to_half(std::nanf("")))));
}

TEST_CASE("RowStats push and merge equal the direct max and sum") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> row(1000);
  for (float& x : row) x = normal(rng);
  row[10] = flashjit::negative_infinity();  // masked values contribute nothing
  flashjit::RowStats first = flashjit::empty_row_stats(), second = flashjit::empty_row_stats();
  for (std::size_t i = 0; i < row.size(); ++i) {
    (i < 300 ? first : second) = flashjit::push(i < 300 ? first : second, row[i]);
  }
  const flashjit::RowStats merged = flashjit::merge(first, second);
  const float max = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float x : row) sum += std::exp2(double(x) - max);
  CHECK(merged.max == max);
  CHECK(merged.sum == doctest::Approx(sum).epsilon(1e-5));
  const flashjit::RowStats empty =
      flashjit::merge(flashjit::empty_row_stats(), flashjit::empty_row_stats());
  CHECK(empty.sum == 0.0f);  // -inf - -inf must not leak a NaN
  CHECK(flashjit::inverse_sum(empty) == 0.0f);
  CHECK(flashjit::merge(empty, merged).sum == merged.sum);
}

TEST_CASE("FastDivider gives n / d for every divisor to 4096 and numerators to 2^31 - 1") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> any(0, 0x7fffffff);
  long checked = 0, wrong = 0;
  for (int d = 1; d <= 4096; ++d) {
    const flashjit::FastDivider divider(d);
    // The numerators where a wrong multiplier shows first: around multiples of d, the top of
    // the range, and random ones.
    std::vector<int> numerators{0, 1, d - 1, d, d + 1, 2 * d - 1, 0x7fffffff, 0x7fffffff - d};
    for (int k : {1000, 65536, 1 << 20, 0x7fffffff / d}) {
      const long long multiple = static_cast<long long>(k) * d;
      if (multiple - 1 <= 0x7fffffff) numerators.push_back(static_cast<int>(multiple - 1));
      if (multiple <= 0x7fffffff) numerators.push_back(static_cast<int>(multiple));
    }
    for (int i = 0; i < 64; ++i) numerators.push_back(any(rng));
    for (int n : numerators) {
      const int quotient = divider.divide(n);
      ++checked;
      if (quotient != n / d || divider.remainder(n, quotient) != n % d) {
        if (wrong++ == 0) MESSAGE("n = " << n << ", d = " << d << ": " << quotient);
      }
    }
  }
  CHECK(checked > 4096 * 70);
  CHECK(wrong == 0);
}
