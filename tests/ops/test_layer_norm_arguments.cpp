// Every bad argument to layer_norm and layer_norm_backward is a named error, raised before
// anything is launched or written.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "layer_norm/layer_norm.hpp"
#include "support/argument_cases.hpp"
#include "support/emulator_runtime.hpp"

using namespace flashjit;
using flashjit::kernels::validate_layer_norm_arguments;
using flashjit::kernels::validate_layer_norm_backward_arguments;

namespace {

constexpr std::int64_t kRows = 5, kCols = 48;

TensorView rows_of(std::vector<float>& data) {
  return TensorView::contiguous(data.data(), DType::f32, {kRows, kCols});
}
TensorView cols_of(std::vector<float>& data) {
  return TensorView::contiguous(data.data(), DType::f32, {kCols});
}
TensorView stats_of(std::vector<float>& data) {
  return TensorView::contiguous(data.data(), DType::f32, {kRows});
}

/// Host arrays of every tensor either call takes, poisoned (NaN bytes) like fresh outputs.
struct Arrays {
  std::vector<float> x, residual, sum, y, dy, dx;
  std::vector<float> gamma, beta, bias, dgamma, dbeta, dbias;
  std::vector<float> mean, rstd;
  Arrays() {
    for (auto* rows : {&x, &residual, &sum, &y, &dy, &dx}) rows->assign(kRows * kCols, NAN);
    for (auto* cols : {&gamma, &beta, &bias, &dgamma, &dbeta, &dbias}) cols->assign(kCols, NAN);
    mean.assign(kRows, NAN);
    rstd.assign(kRows, NAN);
  }
};

/// A valid fused forward call; each subcase breaks one argument.
struct ForwardCall : Arrays, testing::ArgumentChecks<ForwardCall> {
  LayerNorm options{.bias = cols_of(bias), .residual = rows_of(residual), .sum = rows_of(sum)};
  TensorView x_view = rows_of(x), gamma_view = cols_of(gamma), beta_view = cols_of(beta);
  TensorView y_view = rows_of(y), mean_view = stats_of(mean), rstd_view = stats_of(rstd);

  void validate() const {
    validate_layer_norm_arguments(options, x_view, gamma_view, beta_view, y_view, mean_view,
                                  rstd_view);
  }
};

/// A valid backward call with dbias; each subcase breaks one argument.
struct BackwardCall : Arrays, testing::ArgumentChecks<BackwardCall> {
  LayerNorm options;
  TensorView x_view = rows_of(x), gamma_view = cols_of(gamma), mean_view = stats_of(mean);
  TensorView rstd_view = stats_of(rstd), dy_view = rows_of(dy), dx_view = rows_of(dx);
  TensorView dgamma_view = cols_of(dgamma), dbeta_view = cols_of(dbeta);
  TensorView dbias_view = cols_of(dbias);

  void validate() const {
    validate_layer_norm_backward_arguments(options, x_view, gamma_view, mean_view, rstd_view,
                                           dy_view, dx_view, dgamma_view, dbeta_view, dbias_view);
  }
};

}  // namespace

TEST_CASE("layer_norm rejects each bad argument by name") {
  ForwardCall call;
  CHECK_NOTHROW(call.validate());
  call.rejects_each({
      {"eps 0", [](ForwardCall& c) { c.options.epsilon = 0; }, "options.epsilon"},
      {"eps negative", [](ForwardCall& c) { c.options.epsilon = -1e-5f; }, "options.epsilon"},
      {"eps NaN", [](ForwardCall& c) { c.options.epsilon = NAN; }, "options.epsilon"},
      {"eps inf", [](ForwardCall& c) { c.options.epsilon = INFINITY; }, "options.epsilon"},
      {"null x", [](ForwardCall& c) { c.x_view.data = nullptr; }, "x"},
      {"x rank 3", [](ForwardCall& c) { c.x_view.rank = 3; }, "x.rank"},
      {"x int32", [](ForwardCall& c) { c.x_view.dtype = DType::i32; }, "x.dtype"},
      {"cols 0", [](ForwardCall& c) { c.x_view.shape[1] = 0; }, "x.shape"},
      {"cols over 65536", [](ForwardCall& c) { c.x_view.shape[1] = 65537; }, "x.shape"},
      {"x column stride", [](ForwardCall& c) { c.x_view.strides[1] = 2; }, "x.strides"},
      {"gamma length", [](ForwardCall& c) { c.gamma_view.shape[0] = kCols - 1; }, "gamma.shape"},
      {"gamma dtype", [](ForwardCall& c) { c.gamma_view.dtype = DType::bf16; }, "gamma.dtype"},
      {"gamma strided", [](ForwardCall& c) { c.gamma_view.strides[0] = 2; }, "gamma.strides"},
      {"null gamma", [](ForwardCall& c) { c.gamma_view.data = nullptr; }, "gamma"},
      {"missing beta", [](ForwardCall& c) { c.beta_view = {}; }, "beta.rank"},
      {"beta with RMS norm", [](ForwardCall& c) { c.options.rms = true; }, "beta"},
      {"mean with RMS norm",
       [](ForwardCall& c) {
         c.options.rms = true;
         c.beta_view = {};
       },
       "mean"},
      {"bias shape", [](ForwardCall& c) { c.options.bias.shape[0] = 2; }, "options.bias.shape"},
      {"residual dtype", [](ForwardCall& c) { c.options.residual.dtype = DType::f16; },
       "options.residual.dtype"},
      {"residual rows", [](ForwardCall& c) { c.options.residual.shape[0] = 1; },
       "options.residual.shape"},
      {"sum shape", [](ForwardCall& c) { c.options.sum.shape[1] = 1; }, "options.sum.shape"},
      {"sum is the residual", [](ForwardCall& c) { c.options.sum = c.options.residual; },
       "options.sum"},
      {"y shape", [](ForwardCall& c) { c.y_view.shape[0] = kRows + 1; }, "y.shape"},
      {"y dtype", [](ForwardCall& c) { c.y_view.dtype = DType::f16; }, "y.dtype"},
      {"y overlaps gamma", [](ForwardCall& c) { c.y_view.data = c.gamma.data(); }, "y"},
      {"y rows overlap", [](ForwardCall& c) { c.y_view.strides[0] = 1; }, "y.strides"},
      {"mean fp16", [](ForwardCall& c) { c.mean_view.dtype = DType::f16; }, "mean.dtype"},
      {"mean length", [](ForwardCall& c) { c.mean_view.shape[0] = 2; }, "mean.shape"},
      {"rstd length", [](ForwardCall& c) { c.rstd_view.shape[0] = kRows + 1; }, "rstd.shape"},
      {"rstd is the mean", [](ForwardCall& c) { c.rstd_view = c.mean_view; }, "mean"},
  });
}

TEST_CASE("layer_norm takes y in place of x, and every optional output absent") {
  ForwardCall call;
  call.y_view = call.x_view;
  CHECK_NOTHROW(call.validate());
  call.mean_view = call.rstd_view = call.options.sum = {};
  CHECK_NOTHROW(call.validate());
  call.options = {.rms = true};
  call.beta_view = {};
  CHECK_NOTHROW(call.validate());
}

TEST_CASE("layer_norm_backward rejects each bad argument by name") {
  BackwardCall call;
  CHECK_NOTHROW(call.validate());
  call.rejects_each({
      {"fused bias", [](BackwardCall& c) { c.options.bias = cols_of(c.bias); }, "options.bias"},
      {"fused residual", [](BackwardCall& c) { c.options.residual = rows_of(c.residual); },
       "options.residual"},
      {"fused sum", [](BackwardCall& c) { c.options.sum = rows_of(c.sum); }, "options.sum"},
      {"cols over 65536", [](BackwardCall& c) { c.x_view.shape[1] = 70000; }, "x.shape"},
      {"missing mean", [](BackwardCall& c) { c.mean_view = {}; }, "mean"},
      {"missing rstd", [](BackwardCall& c) { c.rstd_view = {}; }, "rstd"},
      {"mean with RMS norm", [](BackwardCall& c) { c.options.rms = true; }, "mean"},
      {"dbeta with RMS norm",
       [](BackwardCall& c) {
         c.options.rms = true;
         c.mean_view = {};
       },
       "dbeta"},
      {"rstd length", [](BackwardCall& c) { c.rstd_view.shape[0] = 1; }, "rstd.shape"},
      {"dy dtype", [](BackwardCall& c) { c.dy_view.dtype = DType::bf16; }, "dy.dtype"},
      {"dy shape", [](BackwardCall& c) { c.dy_view.shape[1] = 3; }, "dy.shape"},
      {"null dx", [](BackwardCall& c) { c.dx_view.data = nullptr; }, "dx"},
      {"dx is dy", [](BackwardCall& c) { c.dx_view = c.dy_view; }, "dx"},
      {"dgamma length", [](BackwardCall& c) { c.dgamma_view.shape[0] = 1; }, "dgamma.shape"},
      {"missing dbeta", [](BackwardCall& c) { c.dbeta_view = {}; }, "dbeta.rank"},
      {"dbias is dgamma", [](BackwardCall& c) { c.dbias_view = c.dgamma_view; }, "dgamma"},
      {"dbias dtype", [](BackwardCall& c) { c.dbias_view.dtype = DType::f16; }, "dbias.dtype"},
  });
}

TEST_CASE("a rejected call writes nothing") {
  Runtime& runtime = testing::emulator();
  const std::size_t bytes = kRows * kCols * sizeof(float);
  DeviceBuffer x = runtime.allocate(bytes), y = runtime.allocate(bytes);
  DeviceBuffer gamma = runtime.allocate(kCols * 4), beta = runtime.allocate(kCols * 4);
  DeviceBuffer rstd = runtime.allocate(kRows * 4), dx = runtime.allocate(bytes);
  DeviceBuffer dgamma = runtime.allocate(kCols * 4);
  std::vector<float> zeros(kRows * kCols, 0.0f);
  runtime.copy_to_device(x.data(), zeros.data(), bytes);
  auto rows = [](DeviceBuffer& b) {
    return TensorView::contiguous(b.data(), DType::f32, {kRows, kCols});
  };
  auto cols = [](DeviceBuffer& b) { return TensorView::contiguous(b.data(), DType::f32, {kCols}); };
  const TensorView stats = TensorView::contiguous(rstd.data(), DType::f32, {kRows});
  testing::check_names(
      [&] {
        runtime.layer_norm({.epsilon = 0}, rows(x), cols(gamma), cols(beta), rows(y), {}, stats);
      },
      "options.epsilon");
  testing::check_names(
      [&] {
        runtime.layer_norm_backward({}, rows(x), cols(gamma), {}, stats, rows(y), rows(dx),
                                    cols(dgamma), cols(beta), {});
      },
      "mean");
  auto untouched = [&](DeviceBuffer& buffer, std::size_t size) {
    std::vector<unsigned char> host(size);
    runtime.copy_to_host(host.data(), buffer.data(), size);
    for (unsigned char byte : host) {
      if (byte != 0xff) return false;
    }
    return true;
  };
  CHECK(untouched(y, bytes));
  CHECK(untouched(rstd, kRows * 4));
  CHECK(untouched(dx, bytes));
  CHECK(untouched(dgamma, kCols * 4));
  CHECK(untouched(beta, kCols * 4));
}
