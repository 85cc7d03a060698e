#pragma once
// Memory a Runtime hands out for tensors, freed when its owner goes.
#include <cstddef>

#include "flashjit/device.hpp"

namespace flashjit {

namespace detail {
class RuntimeBackend;
}  // namespace detail

/// Memory owned by a Runtime (device memory; host memory on the emulator), freed when
/// destroyed. It must not outlive its Runtime.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  /// Device address of the first byte.
  void* data() const { return data_; }
  /// Size in bytes.
  std::size_t size() const { return size_; }

 private:
  friend class detail::RuntimeBackend;  // the only place buffers are made
  DeviceBuffer(detail::RuntimeBackend* backend, void* data, std::size_t size)
      : backend_(backend), data_(data), size_(size) {}
  DeviceBuffer(detail::RuntimeBackend* backend, void* data, std::size_t size, Stream stream)
      : backend_(backend), data_(data), size_(size), stream_(stream), stream_ordered_(true) {}
  void release() noexcept;
  detail::RuntimeBackend* backend_ = nullptr;
  void* data_ = nullptr;
  std::size_t size_ = 0;
  Stream stream_ = nullptr;      // the stream a stream-ordered buffer is freed on
  bool stream_ordered_ = false;  // from allocate_on_stream()
};

}  // namespace flashjit
