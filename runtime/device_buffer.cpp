// DeviceBuffer: memory a backend handed out, returned to it when the buffer goes.
#include "flashjit/device_buffer.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "runtime_backend.hpp"

namespace flashjit {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      stream_(std::exchange(other.stream_, nullptr)),
      stream_ordered_(std::exchange(other.stream_ordered_, false)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    backend_ = std::exchange(other.backend_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    stream_ = std::exchange(other.stream_, nullptr);
    stream_ordered_ = std::exchange(other.stream_ordered_, false);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
  if (data_ == nullptr) return;
  backend_->allocations.remove(data_);
  if (stream_ordered_) {
    backend_->free_on_stream(data_, stream_);
  } else {
    backend_->free(data_);
  }
  data_ = nullptr;
}

namespace detail {

DeviceBuffer RuntimeBackend::allocate_buffer(std::size_t bytes) {
  DeviceBuffer buffer(this, allocate(bytes), bytes);
  allocations.add(buffer.data(), bytes);
  return buffer;
}

DeviceBuffer RuntimeBackend::allocate_buffer_on_stream(std::size_t bytes, Stream stream) {
  DeviceBuffer buffer(this, allocate_on_stream(bytes, stream), bytes, stream);
  allocations.add(buffer.data(), bytes);
  return buffer;
}

int* RuntimeBackend::zeroed_counters(std::size_t count, Stream stream) {
  const std::lock_guard<std::mutex> lock(counters_mutex_);
  HeldCounters& held = counters_[stream];
  if (held.count < count) {
    const std::size_t grown = std::max<std::size_t>(count, 2 * held.count);
    DeviceBuffer buffer = allocate_buffer(grown * sizeof(int));
    const std::vector<int> zeros(grown, 0);
    copy_to_device(buffer.data(), zeros.data(), grown * sizeof(int));
    if (held.count > 0) outgrown_counters_.push_back(std::move(held.buffer));
    held = {std::move(buffer), grown};
  }
  return static_cast<int*>(held.buffer.data());
}

void RuntimeBackend::release_held_counters() noexcept {
  counters_.clear();
  outgrown_counters_.clear();
}

}  // namespace detail
}  // namespace flashjit
