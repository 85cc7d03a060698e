// The layer-norm cluster kernels' persistent grid takes no more clusters than the backend says
// are resident at once (on a GPU the driver's cuOccupancyMaxActiveClusters, which can be fewer
// than the SMs' blocks over the cluster size), and its rows come out the same with fewer
// clusters.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "autotune/tuning_state.hpp"
#include "layer_norm/layer_norm.hpp"
#include "support/random_values.hpp"
#include "support/recording_backend.hpp"

using namespace flashjit;

namespace {

/// The sm_90a emulator whose executor says `clusters` clusters are resident at once (0: it
/// cannot say, as the emulator itself), recording each launch's kernel and shape.
class ClusterLimitedBackend final : public testing::LaunchRecordingBackend {
 public:
  explicit ClusterLimitedBackend(int clusters)
      : LaunchRecordingBackend("sm_90a"), clusters_(clusters) {}
  int questions = 0;  ///< resident_clusters calls

  int resident_clusters(const detail::KernelSpec& spec, const detail::LaunchShape& shape) override {
    ++questions;
    CHECK(shape.cluster_x > 1);
    CHECK(LaunchRecordingBackend::resident_clusters(spec, shape) == 0);  // the emulator cannot say
    return clusters_;
  }

 private:
  int clusters_;
};

/// A layer norm's forward and backward over `rows` rows of `cols` bf16 columns on `backend`.
struct Run {
  std::vector<std::uint16_t> y, dx;
  std::vector<std::uint16_t> dgamma;
};

Run run_layer_norm(ClusterLimitedBackend& backend, std::int64_t rows, std::int64_t cols) {
  autotune::TuningState choice(TuningPolicy::off, backend);
  std::vector<DeviceBuffer> held;
  const auto tensor = [&](DType dtype, std::vector<std::int64_t> shape,
                          const std::vector<std::uint16_t>& bits = {}) {
    std::size_t bytes = dtype_size(dtype);
    for (std::int64_t extent : shape) bytes *= static_cast<std::size_t>(extent);
    held.push_back(backend.allocate_buffer(bytes));
    std::vector<unsigned char> contents(bytes, 0xff);  // outputs poisoned
    if (!bits.empty()) std::memcpy(contents.data(), bits.data(), bytes);
    backend.copy_to_device(held.back().data(), contents.data(), bytes);
    return shape.size() == 1
               ? TensorView::contiguous(held.back().data(), dtype, {shape[0]})
               : TensorView::contiguous(held.back().data(), dtype, {shape[0], shape[1]});
  };
  const auto n = static_cast<std::size_t>(rows * cols);
  const TensorView x = tensor(DType::bf16, {rows, cols}, testing::random_bf16(n, 1, 0.5f));
  const TensorView gamma = tensor(DType::bf16, {cols}, testing::random_bf16(n / rows, 2));
  const TensorView beta = tensor(DType::bf16, {cols}, testing::random_bf16(n / rows, 3));
  const TensorView dy = tensor(DType::bf16, {rows, cols}, testing::random_bf16(n, 4));
  const TensorView y = tensor(DType::bf16, {rows, cols}), dx = tensor(DType::bf16, {rows, cols});
  const TensorView mean = tensor(DType::f32, {rows}), rstd = tensor(DType::f32, {rows});
  const TensorView dgamma = tensor(DType::bf16, {cols}), dbeta = tensor(DType::bf16, {cols});
  const LayerNorm options;
  kernels::run_layer_norm(backend, choice, options, x, gamma, beta, y, mean, rstd, Stream{});
  kernels::run_layer_norm_backward(backend, choice, options, x, gamma, mean, rstd, dy, dx, dgamma,
                                   dbeta, TensorView{}, Stream{});
  Run run{std::vector<std::uint16_t>(n), std::vector<std::uint16_t>(n),
          std::vector<std::uint16_t>(static_cast<std::size_t>(cols))};
  backend.copy_to_host(run.y.data(), y.data, n * 2);
  backend.copy_to_host(run.dx.data(), dx.data, n * 2);
  backend.copy_to_host(run.dgamma.data(), dgamma.data, run.dgamma.size() * 2);
  return run;
}

}  // namespace

TEST_CASE("sm_90a layer norm: a cluster grid holds no more clusters than are resident at once") {
  // 65 536 bf16 columns: the forward splits a row over 2 blocks, the backward over 4; 5 rows.
  const std::int64_t rows = 5, cols = 65536;
  ClusterLimitedBackend unlimited(0), limited(2);
  const Run all = run_layer_norm(unlimited, rows, cols);
  const Run two = run_layer_norm(limited, rows, cols);
  // Row launches (forward, backward) and the backward's parameter-gradient launch.
  REQUIRE(unlimited.launches.size() == 3);
  REQUIRE(limited.launches.size() == 3);
  CHECK(limited.questions == 2);
  for (int launch : {0, 1}) {
    CAPTURE(limited.launches[launch].first);
    const detail::LaunchShape& shape = limited.launches[launch].second;
    CHECK(shape.cluster_x == (launch == 0 ? 2u : 4u));
    CHECK(shape.grid_x == 2 * shape.cluster_x);  // two clusters, as the backend said
    CHECK(unlimited.launches[launch].second.grid_x == rows * shape.cluster_x);  // a row each
  }
  // Each row's values do not depend on which cluster took it; dγ adds two partials, not five
  // (in fp32, rounded to bf16 once: at most an ulp apart).
  CHECK(two.y == all.y);
  CHECK(two.dx == all.dx);
  int apart = 0;  // columns of dγ more than an ulp apart
  for (std::size_t c = 0; c < all.dgamma.size(); ++c) {
    const float a = float_from_bf16_bits(all.dgamma[c]), b = float_from_bf16_bits(two.dgamma[c]);
    if (std::fabs(a - b) > std::fabs(a) / 128) ++apart;
  }
  CHECK(apart == 0);
}
