#pragma once
// What a Runtime runs on: a CUDA GPU or the CPU emulator. Memory, copies, synchronization and
// launches differ per backend. Ops in ops/ and the autotuner work through this; users see
// the public Runtime (api/), which owns one.
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "allocations.hpp"
#include "executor.hpp"
#include "flashjit/device.hpp"
#include "flashjit/device_buffer.hpp"
#include "flashjit/work_counters.hpp"

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

  /// `bytes` of memory as a buffer that frees itself, recorded in `allocations`.
  DeviceBuffer allocate_buffer(std::size_t bytes);
  /// `bytes` of memory ordered on `stream` (see Runtime::allocate_on_stream), as a buffer that
  /// frees itself in the stream's order, recorded in `allocations`.
  DeviceBuffer allocate_buffer_on_stream(std::size_t bytes, Stream stream);

  /// `count` 32-bit counters, zero for the work queued next on `stream`, which the kernels that
  /// use them leave at zero (the decode kernel's split arrivals, the persistent masked Hopper
  /// forward's tile counter): held per stream for the backend's life, so a call allocates
  /// nothing and captures into a CUDA graph. A stream's first call (or one that needs more)
  /// allocates and zeroes them synchronously: make it before a capture, as with a library's
  /// workspace. Outgrown counters stay allocated until the backend goes, since queued work may
  /// still use them.
  int* zeroed_counters(std::size_t count, Stream stream);

  /// At least `bytes` of scratch memory for the work queued next on `stream` (split-KV's
  /// partials), whatever the work before left in it: held per stream like zeroed_counters, so a
  /// call that needs scratch allocates nothing, neither on the host nor in the stream, and
  /// captures into a CUDA graph once a call as large has run on the stream. Grown to at least
  /// twice its size when a call needs more.
  void* held_workspace(std::size_t bytes, Stream stream);

  /// What the backend keeps for its life under `key` (a block mask built once per mask and
  /// size), made by `make` on the key's first use (a throw keeps nothing); nullptr for a new
  /// key once kMaxKept are kept. `make` runs under a lock: it may launch and synchronize.
  std::shared_ptr<const void> kept(const std::string& key,
                                   const std::function<std::shared_ptr<const void>()>& make);
  static constexpr std::size_t kMaxKept = 64;

  /// The buffers handed out and not yet freed: copies are checked against them.
  AllocationTable allocations;

 protected:
  /// Frees the held counters and workspaces; each backend's destructor calls it first, while
  /// its own free() can still run.
  void release_held_buffers() noexcept;

 private:
  enum class HeldKind { counters, workspace };
  /// The held buffer of (`kind`, `stream`) of at least `bytes`, grown (and, for counters,
  /// zeroed) when smaller; an outgrown buffer stays allocated until the backend goes, since
  /// queued work may still use it.
  void* held_buffer(HeldKind kind, std::size_t bytes, Stream stream);
  std::mutex held_mutex_;
  std::map<std::pair<HeldKind, Stream>, DeviceBuffer> held_;
  std::vector<DeviceBuffer> outgrown_;
  std::mutex kept_mutex_;
  std::map<std::string, std::shared_ptr<const void>> kept_;
};

/// The cuda backend on device `ordinal` (loads the driver; throws as Runtime's constructor).
std::unique_ptr<RuntimeBackend> open_cuda_backend(int ordinal);

class EmulatedKernelTable;

/// The emulator backend: host memory, launches run by the host-compiled kernels of `kernels`
/// (emulated_kernel_table.hpp), which must outlive it, or by kernels the host compiler builds at
/// run time (host_kernels.hpp). It models the GPU `arch` names, "sm_80" (A100) or "sm_90a"
/// (H100: kernels are chosen for it, the Hopper path included); anything else throws
/// InvalidArgument("emulated_arch"). Never touches the CUDA driver.
/// With `model_memory`, each launch runs the emulator's memory model for that GPU.
std::unique_ptr<RuntimeBackend> open_emulator_backend(const EmulatedKernelTable& kernels,
                                                      const std::string& arch = "sm_80",
                                                      bool model_memory = false);

}  // namespace flashjit::detail
