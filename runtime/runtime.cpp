#include "flashjit/runtime.hpp"

#include <utility>

#include "device_context.hpp"
#include "driver.hpp"

namespace flashjit {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    context_ = std::exchange(other.context_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
  if (data_ == nullptr) return;
  try {
    context_->make_current();
    detail::driver().cuMemFree(reinterpret_cast<CUdeviceptr>(data_));
  } catch (...) {
    // A destructor cannot report; the context is being torn down anyway.
  }
  data_ = nullptr;
}

Runtime::Runtime(const RuntimeOptions& options)
    : context_(std::make_unique<detail::DeviceContext>(options.device)) {}
Runtime::~Runtime() = default;
Runtime::Runtime(Runtime&&) noexcept = default;
Runtime& Runtime::operator=(Runtime&&) noexcept = default;

const DeviceInfo& Runtime::device() const { return context_->info(); }
detail::DeviceContext& Runtime::context() { return *context_; }

DeviceBuffer Runtime::allocate(std::size_t bytes) {
  context_->make_current();
  CUdeviceptr pointer = 0;
  FLASHJIT_CU(cuMemAlloc, &pointer, bytes == 0 ? 1 : bytes);
  return DeviceBuffer(context_.get(), reinterpret_cast<void*>(pointer), bytes);
}

void Runtime::copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  context_->make_current();
  FLASHJIT_CU(cuMemcpyHtoD, reinterpret_cast<CUdeviceptr>(device_dst), host_src, bytes);
}

void Runtime::copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  context_->make_current();
  FLASHJIT_CU(cuMemcpyDtoH, host_dst, reinterpret_cast<CUdeviceptr>(device_src), bytes);
}

void Runtime::synchronize(Stream stream) {
  context_->make_current();
  FLASHJIT_CU(cuStreamSynchronize, static_cast<CUstream>(stream));
}

}  // namespace flashjit
