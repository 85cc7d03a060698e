// The smallest flashjit program: a row-wise softmax on GPU 0 or, when this machine has no GPU
// (no driver, or none it sees), on the CPU emulator, as `flashjit run` does; the first line
// says which. On a GPU the kernel for this row length and dtype is compiled on the first run and
// loaded from the cache on the next; the emulator has every softmax kernel built in.
#include <cmath>
#include <cstdio>
#include <vector>

#include "flashjit/flashjit.hpp"

int main() {
  try {
    const flashjit::SystemInfo system = flashjit::query_system();
    const bool gpu = !system.devices.empty();
    if (gpu) {
      std::printf("running on GPU 0: %s\n", system.devices.front().name.c_str());
    } else {
      std::printf("running on the CPU emulator (no GPU: %s)\n", system.unavailable_reason.c_str());
    }
    flashjit::Runtime runtime(
        {.backend = gpu ? flashjit::Backend::cuda : flashjit::Backend::emulator});
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
    return std::fabs(row_sum - 1.0) <= 1e-4 ? 0 : 1;  // a softmax row sums to 1
  } catch (const flashjit::Error& error) {
    std::fprintf(stderr, "softmax example: %s\n", error.what());
    return 1;
  }
}
