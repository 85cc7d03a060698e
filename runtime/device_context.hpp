#pragma once
// One GPU: its primary context, the kernels loaded on it (key -> function), launches.
#include <cuda.h>

#include <map>
#include <mutex>
#include <string>

#include "flashjit/device.hpp"
#include "kernel_cache.hpp"

namespace flashjit::detail {

/// Grid, block, dynamic shared memory and stream of one launch.
struct LaunchShape {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  std::size_t dynamic_shared_bytes = 0;
  CUstream stream = nullptr;
};

class DeviceContext {
 public:
  /// Retains device `ordinal`'s primary context.
  explicit DeviceContext(int ordinal);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const DeviceInfo& info() const { return info_; }
  /// Makes this device's context current on the calling thread.
  void make_current() const;

  /// The loaded function for `spec` (through the process kernel cache), able to use
  /// `dynamic_shared_bytes` of dynamic shared memory (raised above 48 KB when asked).
  CUfunction function(const KernelSpec& spec, std::size_t dynamic_shared_bytes);

  /// Launches `function` with `args` (pointers to each argument, in order).
  void launch(CUfunction function, const LaunchShape& shape, void** args);

  /// Compiles or fetches `spec` and launches it with the given arguments by value.
  template <typename... Args>
  void launch(const KernelSpec& spec, const LaunchShape& shape, Args... args) {
    void* pointers[] = {static_cast<void*>(&args)..., nullptr};
    launch(function(spec, shape.dynamic_shared_bytes), shape, pointers);
  }

 private:
  struct LoadedKernel {
    CUlibrary library = nullptr;
    CUmodule module = nullptr;  // the fallback when the library API refuses the image
    CUfunction function = nullptr;
    std::size_t dynamic_shared_limit = 48 * 1024;
  };
  LoadedKernel load(const CacheEntry& entry) const;

  DeviceInfo info_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::mutex mutex_;
  std::map<std::string, LoadedKernel> loaded_;
};

}  // namespace flashjit::detail
