// GPU tests (label `gpu`): layer_norm on real hardware against the float64 reference at real
// sizes (every bucket and the streamed rows, fused adds, RMS norm, every dtype, forward and
// backward), dγ and dβ bit-identical across runs, rows with a large mean, and the driver's count
// of resident clusters that sizes the cluster kernels' grids.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "flashjit/flashjit.hpp"
#include "layer_norm/layer_norm.hpp"
#include "layer_norm/layer_norm_case.hpp"
#include "runtime/runtime_backend.hpp"

using namespace flashjit;
using flashjit::testing::LayerNormCase;

TEST_CASE("layer_norm on the GPU matches the float64 reference, forward and backward") {
  Runtime runtime;
  for (DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    for (bool rms : {false, true}) {
      for (std::int64_t cols : {1, 100, 768, 1024, 4096, 5000, 16384, 65536}) {
        LayerNormCase c{.rows = cols > 8192 ? 64 : 1031, .cols = cols, .dtype = dtype, .rms = rms};
        c.bias = c.residual = cols % 2 == 0;
        c.padded = cols == 100;
        if (rms && cols == 1) c.epsilon = 0.1f;  // see the emulated suite: ill-conditioned at 1e-5
        CAPTURE(c.name());
        const auto forward = testing::run_layer_norm_case(runtime, c);
        CHECK_MESSAGE(forward.ok, forward.describe());
        const auto backward = testing::run_layer_norm_backward_case(runtime, c);
        CHECK_MESSAGE(backward.ok, backward.describe());
      }
    }
  }
}

TEST_CASE("layer_norm's dgamma and dbeta are the same bits on every GPU run") {
  Runtime runtime;
  const LayerNormCase c{.rows = 20000, .cols = 1024, .dtype = DType::bf16, .bias = true};
  const auto inputs = testing::layer_norm_inputs(c);
  const auto first = testing::run_layer_norm(runtime, c, inputs, true);
  for (int run = 0; run < 3; ++run) {
    const auto again = testing::run_layer_norm(runtime, c, inputs, true);
    CHECK(again.dgamma == first.dgamma);
    CHECK(again.dbeta == first.dbeta);
    CHECK(again.dbias == first.dbias);
  }
}

TEST_CASE("layer_norm on the GPU keeps the variance of rows of 1e4 + N(0, 1)") {
  Runtime runtime;
  const LayerNormCase c{.rows = 64, .cols = 8192, .dtype = DType::f32, .offset = 1e4};
  const auto inputs = testing::layer_norm_inputs(c);
  const auto out = testing::run_layer_norm(runtime, c, inputs, false);
  const auto expected = reference::layer_norm(c.shape(), inputs.x, inputs.gamma, inputs.beta);
  for (std::size_t r = 0; r < out.rstd.size(); ++r) {
    const double variance = 1.0 / (out.rstd[r] * out.rstd[r]) - c.epsilon;
    const double exact = 1.0 / (expected.rstd[r] * expected.rstd[r]) - c.epsilon;
    CHECK(std::fabs(variance - exact) / exact < 1e-5);
  }
}

TEST_CASE("the driver says how many layer_norm clusters are resident at once") {
  const std::unique_ptr<detail::RuntimeBackend> backend = detail::open_cuda_backend(0);
  const DeviceInfo& device = backend->info();
  REQUIRE_MESSAGE(device.cc_major >= 9, "thread block clusters need sm_90 or later");
  const kernels::LayerNormConfig config =
      kernels::default_layer_norm_config(DType::bf16, false, 65536);
  for (int cluster : {2, 4, 8}) {
    detail::LaunchShape shape;
    shape.block_x = static_cast<unsigned>(config.threads_per_row);
    shape.cluster_x = static_cast<unsigned>(cluster);
    shape.dynamic_shared_bytes = 200 * 1024;  // one block an SM, as the cluster kernels take
    const int held = backend->executor().resident_clusters(
        kernels::layer_norm_backward_spec(config, device.arch(), cluster), shape);
    // The run's log records what the grids take, beside the SMs' count over the cluster size.
    MESSAGE(device.name << ": " << held << " clusters of " << cluster << " resident at once ("
                        << device.sm_count / cluster << " by SMs)");
    CHECK(held > 0);
    CHECK(held <= device.sm_count / cluster);
  }
}
