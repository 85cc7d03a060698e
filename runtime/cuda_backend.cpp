// The cuda backend: device memory and launches through the driver, on one device's primary
// context.
#include "device_context.hpp"
#include "driver.hpp"
#include "runtime_backend.hpp"

namespace flashjit::detail {
namespace {

class CudaBackend final : public RuntimeBackend, public Executor {
 public:
  explicit CudaBackend(int ordinal) : context_(ordinal) {}

  Backend kind() const override { return Backend::cuda; }
  const DeviceInfo& info() const override { return context_.info(); }

  void* allocate(std::size_t bytes) override {
    context_.make_current();
    CUdeviceptr pointer = 0;
    FLASHJIT_CU(cuMemAlloc, &pointer, bytes == 0 ? 1 : bytes);
    return reinterpret_cast<void*>(pointer);
  }

  void free(void* data) noexcept override {
    try {
      context_.make_current();
      driver().cuMemFree(reinterpret_cast<CUdeviceptr>(data));
    } catch (...) {
      // Called from destructors, which cannot report; the context is being torn down anyway.
    }
  }

  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    context_.make_current();
    FLASHJIT_CU(cuMemcpyHtoD, reinterpret_cast<CUdeviceptr>(dst), src, bytes);
  }

  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    context_.make_current();
    FLASHJIT_CU(cuMemcpyDtoH, dst, reinterpret_cast<CUdeviceptr>(src), bytes);
  }

  void synchronize(Stream stream) override {
    context_.make_current();
    FLASHJIT_CU(cuStreamSynchronize, static_cast<CUstream>(stream));
  }

  Executor& executor() override { return *this; }
  DeviceContext* context() override { return &context_; }

  // The GPU does not check accesses, so the buffers are not needed.
  void launch(const KernelSpec& spec, const LaunchShape& shape, void** args,
              const std::vector<KernelBuffer>& /*buffers*/) override {
    context_.launch(context_.function(spec, shape.dynamic_shared_bytes), shape, args);
  }

 private:
  DeviceContext context_;
};

}  // namespace

std::unique_ptr<RuntimeBackend> open_cuda_backend(int ordinal) {
  return std::make_unique<CudaBackend>(ordinal);
}

}  // namespace flashjit::detail
