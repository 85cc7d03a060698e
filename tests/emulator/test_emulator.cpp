// The real softmax template, compiled with the host compiler, run on the emulator for every
// config of its space and checked against the float64 reference, with no emulator findings.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "attention/check/attention_reference.hpp"
#include "emulator/launch.hpp"
#include "reference/checker.hpp"
#include "softmax/softmax_kernel.cuh"

namespace {

namespace em = flashjit::emulator;
using flashjit::softmax_space::kMaxColsBuckets;
using flashjit::softmax_space::kThreadsPerRow;

constexpr float kScale = 0.7f;
constexpr double kLog2e = 1.4426950408889634;

template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  if constexpr (std::is_same_v<T, flashjit::half_t>) return 1e-3;
  return 8e-3;  // bfloat16: 8 mantissa bits
}

/// Row lengths to try for a bucket: the smallest, a ragged one, and the bucket's edge.
std::vector<int> row_lengths(int max_cols) {
  if (max_cols == 0) return {1, 17, 5000, 70000};
  return {1, 17, max_cols - 1, max_cols};
}

/// Runs softmax_kernel<Config> on `rows` random rows of `cols` with a padded stride; checks the
/// result against the reference, that the padding stayed poisoned, and that the run is clean.
template <class Config>
void check_softmax(long long rows, int cols) {
  using T = typename Config::Element;
  const long long stride = cols + 3;  // (rows, stride), padded
  std::mt19937 rng(static_cast<unsigned>(rows * 131 + cols));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<T> x(static_cast<std::size_t>(rows * stride));
  std::vector<T> y(x.size(), flashjit::from_float<T>(std::nanf("")));  // poisoned
  std::vector<double> x_scaled(x.size(), 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = flashjit::from_float<T>(normal(rng));
    x_scaled[i] = double(kScale) * flashjit::to_float(x[i]);
  }
  const int threads = Config::kThreadsPerRow;
  const int rows_per_block = flashjit::softmax_space::rows_per_block(threads);
  em::LaunchConfig launch{
      .kernel_name = "softmax_kernel",
      .grid = {static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block)},
      .block = {static_cast<unsigned>(threads * rows_per_block)},
      .shared_bytes = static_cast<std::size_t>(flashjit::softmax_space::shared_bytes(threads)),
      .buffers = {em::buffer_of(x.data(), x.size(), "x"), em::buffer_of(y.data(), y.size(), "y")}};
  const em::Report report =
      em::launch(&flashjit::softmax_kernel<Config>, launch, x.data(), y.data(), rows, cols, stride,
                 stride, float(kScale * kLog2e));
  CHECK_MESSAGE(report.clean(), report);

  std::vector<double> expected(x.size(), 0.0);
  flashjit::reference::softmax_rows(x_scaled.data(), rows, cols, stride, expected.data());
  std::vector<double> actual_rows, expected_rows;
  long long padding_written = 0;
  for (long long r = 0; r < rows; ++r) {
    for (long long c = 0; c < stride; ++c) {
      const auto i = static_cast<std::size_t>(r * stride + c);
      const float value = flashjit::to_float(y[i]);
      if (c >= cols) {
        padding_written += std::isnan(value) ? 0 : 1;
        continue;
      }
      actual_rows.push_back(value);
      expected_rows.push_back(expected[i]);
    }
  }
  CHECK(padding_written == 0);
  const auto result =
      flashjit::reference::check_close(actual_rows, expected_rows, tolerance<T>(), "y");
  CHECK_MESSAGE(result.ok, result);
}

template <class T, std::size_t Bucket, std::size_t... Threads>
void sweep_bucket(std::index_sequence<Threads...>) {
  constexpr int max_cols = kMaxColsBuckets[Bucket];
  auto one = [&]<std::size_t R>() {
    constexpr int threads = kThreadsPerRow[R];
    if constexpr (flashjit::softmax_space::config_valid(max_cols, threads)) {
      for (int cols : row_lengths(max_cols)) {
        CAPTURE(max_cols);
        CAPTURE(threads);
        CAPTURE(cols);
        check_softmax<flashjit::SoftmaxConfig<T, max_cols, threads>>(cols > 8192 ? 3 : 9, cols);
      }
    }
  };
  (one.template operator()<Threads>(), ...);
}

template <class T, std::size_t... Buckets>
void sweep(std::index_sequence<Buckets...>) {
  constexpr std::size_t kThreadChoices = std::size(kThreadsPerRow);
  (sweep_bucket<T, Buckets>(std::make_index_sequence<kThreadChoices>{}), ...);
}

}  // namespace

TEST_CASE_TEMPLATE("softmax template on the emulator matches the reference for every config", T,
                   float, flashjit::half_t, flashjit::bfloat16_t) {
  sweep<T>(std::make_index_sequence<std::size(kMaxColsBuckets)>{});
}

TEST_CASE("softmax of 257 rows x 5000 columns on the emulator") {
  check_softmax<flashjit::SoftmaxConfig<float, 0, 128>>(257, 5000);
}
