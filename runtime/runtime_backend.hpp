#pragma once
// What a Runtime runs on: a CUDA GPU or the CPU emulator. Memory, copies, synchronization and
// launches differ per backend; ops in kernels/ see only the Executor, users only the Runtime.
#include <cstddef>
#include <memory>

#include "allocations.hpp"
#include "executor.hpp"
#include "flashjit/device.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::detail {

class RuntimeBackend {
 public:
  virtual ~RuntimeBackend() = default;

  /// Which backend this is.
  virtual Backend kind() const = 0;
  /// The device kernels run on (on the emulator, the GPU it models).
  virtual const DeviceInfo& info() const = 0;
  /// `bytes` (at least 1) of memory kernels can use; throws Error when it cannot.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Frees what allocate() returned.
  virtual void free(void* data) noexcept = 0;
  /// `bytes` of memory ordered on `stream` (see Runtime::allocate_on_stream).
  virtual void* allocate_on_stream(std::size_t bytes, Stream stream) = 0;
  /// Frees what allocate_on_stream() returned, after the work queued on `stream`.
  virtual void free_on_stream(void* data, Stream stream) noexcept = 0;
  /// Copies host memory to kernel-visible memory, synchronously.
  virtual void copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  /// Copies kernel-visible memory to host memory, synchronously.
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  /// Waits for the work queued on `stream`.
  virtual void synchronize(Stream stream) = 0;
  /// Where launches go.
  virtual Executor& executor() = 0;
  /// The CUDA context, or nullptr on a backend that has none.
  virtual DeviceContext* context() = 0;
  /// The work counted per kernel (Runtime::emulated_work), or nullptr on a backend that does
  /// not count (cuda).
  virtual std::vector<KernelWork>* counted_work() { return nullptr; }

  /// What Runtime::allocate and allocate_on_stream handed out and not yet freed.
  AllocationTable allocations;
};

/// The cuda backend on device `ordinal` (loads the driver; throws as Runtime's constructor).
std::unique_ptr<RuntimeBackend> open_cuda_backend(int ordinal);

/// The emulator backend: host memory, kernels from the build-time table of emulated kernels
/// (emulated_kernels.hpp) or built by the host compiler (host_kernels.hpp). Never touches the
/// CUDA driver.
std::unique_ptr<RuntimeBackend> open_emulator_backend();

}  // namespace flashjit::detail
