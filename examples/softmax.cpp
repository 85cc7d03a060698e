// The smallest flashjit program: a row-wise softmax on the GPU. The kernel for this row length
// and dtype is compiled on the first run and loaded from the cache on the next.
#include <cstdio>
#include <vector>

#include "flashjit/flashjit.hpp"

int main() {
  try {
    flashjit::Runtime runtime;  // GPU 0
    const std::int64_t rows = 4, cols = 1000;
    std::vector<float> x(rows * cols);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) / 10.0f;

    flashjit::DeviceBuffer x_device = runtime.allocate(x.size() * sizeof(float));
    flashjit::DeviceBuffer y_device = runtime.allocate(x.size() * sizeof(float));
    runtime.copy_to_device(x_device.data(), x.data(), x.size() * sizeof(float));
    runtime.softmax(
        flashjit::TensorView::contiguous(x_device.data(), flashjit::DType::f32, {rows, cols}),
        flashjit::TensorView::contiguous(y_device.data(), flashjit::DType::f32, {rows, cols}));
    std::vector<float> y(x.size());
    runtime.copy_to_host(y.data(), y_device.data(), y.size() * sizeof(float));

    double row_sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) row_sum += y[static_cast<std::size_t>(c)];
    std::printf("softmax on %s: row 0 sums to %.6f\n", runtime.device().name.c_str(), row_sum);
    return 0;
  } catch (const flashjit::Error& error) {
    std::fprintf(stderr, "softmax example: %s\n", error.what());
    return 1;
  }
}
