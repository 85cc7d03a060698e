// The C API's layer norm (flashjit_layer_norm_forward and _backward) on the emulator: the same
// bits as the C++ API for a fused forward and its backward, the C++ defaults, and bad arguments
// returned as codes naming them, with nothing written.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"
#include "flashjit/flashjit_c.h"

namespace {

using namespace flashjit;

constexpr std::int64_t kRows = 5, kCols = 300;

std::vector<float> random_floats(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

/// Every tensor of a fused call, in one runtime's memory, through either API.
struct Tensors {
  std::vector<void*> blocks;
  void* input;
  void* residual;
  void* bias;
  void* gamma;
  void* beta;
  void* sum;
  void* y;
  void* mean;
  void* rstd;
  void* dy;
  void* dx;
  void* dgamma;
  void* dbeta;
  void* dbias;
};

flashjit_tensor rows(void* data) {
  return {data, FLASHJIT_DTYPE_F32, 2, {kRows, kCols}, {kCols, 1}};
}
flashjit_tensor cols(void* data) { return {data, FLASHJIT_DTYPE_F32, 1, {kCols}, {1}}; }
flashjit_tensor stats(void* data) { return {data, FLASHJIT_DTYPE_F32, 1, {kRows}, {1}}; }

/// Uploads the inputs through `upload(values)` and allocates poisoned outputs with `allocate`.
template <class Upload, class Allocate>
Tensors make_tensors(Upload upload, Allocate allocate) {
  const std::size_t elements = kRows * kCols;
  Tensors t{};
  t.input = upload(random_floats(elements, 1));
  t.residual = upload(random_floats(elements, 2));
  t.bias = upload(random_floats(kCols, 3));
  t.gamma = upload(random_floats(kCols, 4));
  t.beta = upload(random_floats(kCols, 5));
  t.dy = upload(random_floats(elements, 6));
  for (void** out : {&t.sum, &t.y, &t.dx}) *out = allocate(elements * 4);
  for (void** out : {&t.dgamma, &t.dbeta, &t.dbias}) *out = allocate(kCols * 4);
  for (void** out : {&t.mean, &t.rstd}) *out = allocate(kRows * 4);
  return t;
}

/// A C runtime on the emulator backend, destroyed at scope exit.
struct CRuntime {
  flashjit_runtime* runtime = nullptr;
  CRuntime() {
    flashjit_runtime_options options;
    flashjit_runtime_options_init(&options);
    options.backend = FLASHJIT_BACKEND_EMULATOR;
    REQUIRE(flashjit_runtime_create(&options, &runtime) == FLASHJIT_OK);
  }
  ~CRuntime() { flashjit_runtime_destroy(runtime); }
  void* upload(const std::vector<float>& values) {
    void* data = allocate(values.size() * 4);
    REQUIRE(flashjit_copy_to_device(runtime, data, values.data(), values.size() * 4) ==
            FLASHJIT_OK);
    return data;
  }
  void* allocate(std::size_t bytes) {
    void* data = nullptr;
    REQUIRE(flashjit_allocate(runtime, bytes, &data) == FLASHJIT_OK);
    return data;
  }
  std::vector<float> download(const void* data, std::size_t count) {
    std::vector<float> values(count);
    REQUIRE(flashjit_copy_to_host(runtime, values.data(), data, count * 4) == FLASHJIT_OK);
    return values;
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST_CASE("C API: layer norm forward and backward give the C++ API's bits") {
  CRuntime c;
  const Tensors ct = make_tensors([&](const std::vector<float>& v) { return c.upload(v); },
                                  [&](std::size_t bytes) { return c.allocate(bytes); });
  flashjit_layer_norm options;
  flashjit_layer_norm_init(&options);
  const flashjit_tensor bias = cols(ct.bias), residual = rows(ct.residual), sum = rows(ct.sum);
  options.bias = &bias;
  options.residual = &residual;
  options.sum = &sum;
  const flashjit_tensor input = rows(ct.input), gamma = cols(ct.gamma), beta = cols(ct.beta),
                        y = rows(ct.y), mean = stats(ct.mean), rstd = stats(ct.rstd);
  REQUIRE_MESSAGE(flashjit_layer_norm_forward(c.runtime, &options, &input, &gamma, &beta, &y, &mean,
                                              &rstd, nullptr) == FLASHJIT_OK,
                  flashjit_last_error());
  flashjit_layer_norm plain;
  flashjit_layer_norm_init(&plain);
  const flashjit_tensor dy = rows(ct.dy), dx = rows(ct.dx), dgamma = cols(ct.dgamma),
                        dbeta = cols(ct.dbeta), dbias = cols(ct.dbias);
  REQUIRE_MESSAGE(
      flashjit_layer_norm_backward(c.runtime, &plain, &sum, &gamma, &mean, &rstd, &dy, &dx, &dgamma,
                                   &dbeta, &dbias, nullptr) == FLASHJIT_OK,
      flashjit_last_error());

  Runtime cpp(RuntimeOptions{.backend = Backend::emulator});
  std::vector<DeviceBuffer> buffers;
  auto keep = [&](DeviceBuffer buffer) {
    buffers.push_back(std::move(buffer));
    return buffers.back().data();
  };
  const Tensors t = make_tensors(
      [&](const std::vector<float>& v) {
        void* data = keep(cpp.allocate(v.size() * 4));
        cpp.copy_to_device(data, v.data(), v.size() * 4);
        return data;
      },
      [&](std::size_t bytes) { return keep(cpp.allocate(bytes)); });
  auto view = [](const flashjit_tensor& ct_view, void* data) {
    TensorView v;
    v.data = data;
    v.rank = ct_view.rank;
    for (int i = 0; i < v.rank; ++i) {
      v.shape[static_cast<std::size_t>(i)] = ct_view.shape[i];
      v.strides[static_cast<std::size_t>(i)] = ct_view.strides[i];
    }
    return v;
  };
  LayerNorm fused;
  fused.bias = view(bias, t.bias);
  fused.residual = view(residual, t.residual);
  fused.sum = view(sum, t.sum);
  cpp.layer_norm(fused, view(input, t.input), view(gamma, t.gamma), view(beta, t.beta),
                 view(y, t.y), view(mean, t.mean), view(rstd, t.rstd));
  cpp.layer_norm_backward({}, view(sum, t.sum), view(gamma, t.gamma), view(mean, t.mean),
                          view(rstd, t.rstd), view(dy, t.dy), view(dx, t.dx),
                          view(dgamma, t.dgamma), view(dbeta, t.dbeta), view(dbias, t.dbias));
  auto cpp_download = [&](const void* data, std::size_t count) {
    std::vector<float> values(count);
    cpp.copy_to_host(values.data(), data, count * 4);
    return values;
  };
  const std::size_t elements = kRows * kCols;
  CHECK(same_bits(c.download(ct.y, elements), cpp_download(t.y, elements)));
  CHECK(same_bits(c.download(ct.sum, elements), cpp_download(t.sum, elements)));
  CHECK(same_bits(c.download(ct.mean, kRows), cpp_download(t.mean, kRows)));
  CHECK(same_bits(c.download(ct.rstd, kRows), cpp_download(t.rstd, kRows)));
  CHECK(same_bits(c.download(ct.dx, elements), cpp_download(t.dx, elements)));
  CHECK(same_bits(c.download(ct.dgamma, kCols), cpp_download(t.dgamma, kCols)));
  CHECK(same_bits(c.download(ct.dbeta, kCols), cpp_download(t.dbeta, kCols)));
  CHECK(same_bits(c.download(ct.dbias, kCols), cpp_download(t.dbias, kCols)));
}

TEST_CASE("C API: layer norm defaults, and bad arguments named with nothing written") {
  flashjit_layer_norm options;
  flashjit_layer_norm_init(&options);
  const LayerNorm defaults;
  CHECK(options.epsilon == defaults.epsilon);
  CHECK(options.rms == 0);
  CHECK(options.bias == nullptr);
  CHECK(options.residual == nullptr);
  CHECK(options.sum == nullptr);
  flashjit_layer_norm_init(nullptr);  // ignored

  CRuntime c;
  const Tensors ct = make_tensors([&](const std::vector<float>& v) { return c.upload(v); },
                                  [&](std::size_t bytes) { return c.allocate(bytes); });
  const flashjit_tensor input = rows(ct.input), gamma = cols(ct.gamma), beta = cols(ct.beta),
                        y = rows(ct.y), mean = stats(ct.mean), rstd = stats(ct.rstd);
  auto names = [](flashjit_status status, const char* argument) {
    CHECK(status == FLASHJIT_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(std::string(flashjit_last_error()).find(argument) != std::string::npos,
                  flashjit_last_error());
  };
  options.epsilon = 0;
  names(flashjit_layer_norm_forward(c.runtime, &options, &input, &gamma, &beta, &y, &mean, &rstd,
                                    nullptr),
        "'options.epsilon'");
  options.epsilon = 1e-5f;
  names(flashjit_layer_norm_forward(c.runtime, nullptr, &input, &gamma, &beta, &y, &mean, &rstd,
                                    nullptr),
        "'options'");
  names(flashjit_layer_norm_forward(c.runtime, &options, nullptr, &gamma, &beta, &y, &mean, &rstd,
                                    nullptr),
        "'x'");
  flashjit_tensor wide = input;
  wide.shape[1] = 65537;
  names(flashjit_layer_norm_forward(c.runtime, &options, &wide, &gamma, &beta, &y, &mean, &rstd,
                                    nullptr),
        "'x.shape'");
  const flashjit_tensor dy = rows(ct.dy), dx = rows(ct.dx), dgamma = cols(ct.dgamma),
                        dbeta = cols(ct.dbeta);
  names(flashjit_layer_norm_backward(c.runtime, &options, &input, &gamma, nullptr, &rstd, &dy, &dx,
                                     &dgamma, &dbeta, nullptr, nullptr),
        "'mean'");
  for (const void* output : {ct.y, ct.dx}) {
    std::vector<unsigned char> bytes(kRows * kCols * 4);
    REQUIRE(flashjit_copy_to_host(c.runtime, bytes.data(), output, bytes.size()) == FLASHJIT_OK);
    CHECK(std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0xff; }));
  }
}
