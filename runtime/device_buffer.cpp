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

void* RuntimeBackend::held_buffer(HeldKind kind, std::size_t bytes, Stream stream) {
  const std::lock_guard<std::mutex> lock(held_mutex_);
  DeviceBuffer& held = held_[{kind, stream}];
  if (held.size() < bytes) {
    const std::size_t grown = std::max<std::size_t>(bytes, 2 * held.size());
    DeviceBuffer buffer = allocate_buffer(grown);
    if (kind == HeldKind::counters) {
      const std::vector<unsigned char> zeros(grown, 0);
      copy_to_device(buffer.data(), zeros.data(), grown);
    }
    if (held.data() != nullptr) outgrown_.push_back(std::move(held));
    held = std::move(buffer);
  }
  return held.data();
}

int* RuntimeBackend::zeroed_counters(std::size_t count, Stream stream) {
  return static_cast<int*>(held_buffer(HeldKind::counters, count * sizeof(int), stream));
}

void* RuntimeBackend::held_workspace(std::size_t bytes, Stream stream) {
  return held_buffer(HeldKind::workspace, bytes, stream);
}

std::shared_ptr<const void> RuntimeBackend::kept(
    const std::string& key, const std::function<std::shared_ptr<const void>()>& make) {
  const std::lock_guard<std::mutex> lock(kept_mutex_);
  if (auto found = kept_.find(key); found != kept_.end()) return found->second;
  if (kept_.size() >= kMaxKept) return nullptr;
  std::shared_ptr<const void> made = make();
  kept_.emplace(key, made);
  return made;
}

void RuntimeBackend::release_held_buffers() noexcept {
  kept_.clear();  // first: what is kept may hold buffers
  held_.clear();
  outgrown_.clear();
}

}  // namespace detail
}  // namespace flashjit
