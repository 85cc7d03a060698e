#pragma once
// The memory a runtime handed out (Runtime::allocate, flashjit_allocate), so that a copy that
// would run past the end of one is refused with a named error instead of corrupting the heap.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace flashjit::detail {

class AllocationTable {
 public:
  void add(const void* data, std::size_t bytes);
  void remove(const void* data) noexcept;

  /// Throws InvalidArgument(`bytes_argument`) when [data, data + bytes) starts inside one of
  /// the allocations and runs past its end. Memory the runtime did not allocate is not judged
  /// (a framework's tensors, or the caller's host memory on the emulator).
  void check_range(const void* data, std::size_t bytes, const char* bytes_argument) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, std::size_t> size_by_start_;
};

}  // namespace flashjit::detail
