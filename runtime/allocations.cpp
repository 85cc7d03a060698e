#include "allocations.hpp"

#include <iterator>
#include <string>

#include "flashjit/error.hpp"

namespace flashjit::detail {

void AllocationTable::add(const void* data, std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  size_by_start_[reinterpret_cast<std::uintptr_t>(data)] = bytes;
}

void AllocationTable::remove(const void* data) noexcept {
  const std::lock_guard lock(mutex_);
  size_by_start_.erase(reinterpret_cast<std::uintptr_t>(data));
}

void AllocationTable::check_range(const void* data, std::size_t bytes,
                                  const char* bytes_argument) const {
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  const std::lock_guard lock(mutex_);
  auto after = size_by_start_.upper_bound(start);
  if (after == size_by_start_.begin()) return;
  const auto& [base, size] = *std::prev(after);
  const std::uintptr_t offset = start - base;
  if (offset >= size && !(offset == 0 && size == 0)) return;  // not inside this allocation
  if (bytes <= size - offset) return;
  throw InvalidArgument(bytes_argument,
                        "is " + std::to_string(bytes) + "; the copy starts " +
                            std::to_string(offset) + " bytes into a " + std::to_string(size) +
                            "-byte allocation of this runtime and would run " +
                            std::to_string(bytes - (size - offset)) + " bytes past its end");
}

}  // namespace flashjit::detail
