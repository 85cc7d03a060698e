#pragma once
// Kernels the host compiler built for the emulator, by key: memory, then disk, then a compile
// (docs/cache.md, docs/emulator.md). On disk they sit beside the cubins under arch "host", in the
// same self-describing file format, with the same atomic writes, per-key locks and corruption
// checks. In a process, one compile per key is in flight (other callers wait for it), and a
// loaded object stays loaded for the process's life.
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "disk_cache.hpp"
#include "emulator/host_launcher.hpp"
#include "file_io.hpp"
#include "host_compiler.hpp"
#include "kernel_cache.hpp"
#include "kernel_spec.hpp"
#include "single_flight.hpp"

namespace flashjit::detail {

/// The arch host kernels are cached under.
inline constexpr const char* kHostArch = "host";

class HostKernelCache {
 public:
  /// The process-wide cache, configured from the environment as the kernel cache is
  /// (FLASHJIT_CACHE_DIR, FLASHJIT_ALWAYS_COMPILE, FLASHJIT_NO_JIT).
  static HostKernelCache& process_cache();

  /// A cache with `options`' disk root and switches (the runtime uses process_cache(); tests
  /// make their own, as a new process would have).
  explicit HostKernelCache(KernelCache::Options options);

  /// The launcher of `spec` built by `toolchain` from the active templates: from memory, else
  /// loaded from disk, else compiled (saying so on stderr: it takes seconds), loaded and
  /// stored. Throws Error{compile} with the compiler's log, or Error{cache} when the kernel
  /// is not cached and FLASHJIT_NO_JIT is set.
  emulator::HostLaunchFunction get(const KernelSpec& spec, const HostToolchain& toolchain);

  /// Hits and compiles so far.
  const CacheStats& stats() const { return stats_; }

 private:
  emulator::HostLaunchFunction load_or_compile(const KernelSpec& spec,
                                               const HostToolchain& toolchain,
                                               const std::string& key);
  /// The object on disk at `path`, loaded; nullopt when it is missing, invalid or unloadable.
  std::optional<emulator::HostLaunchFunction> from_disk(const std::filesystem::path& path,
                                                        const std::string& key,
                                                        const std::string& name);

  /// The precompiled prelude for `toolchain` as a file a compile can link to, or an empty path:
  /// from the disk cache, or built into it once the cache holds a host kernel (a cache that
  /// compiled one for the emulator is likely to compile more; a single compile would not pay
  /// for it). Never with Clang or without a disk cache; a failure to build one is warned
  /// about once and the kernels compile without it.
  std::filesystem::path prelude(const HostToolchain& toolchain);
  /// Whether the disk cache holds a host kernel.
  bool holds_host_kernels() const;

  KernelCache::Options options_;
  std::optional<DiskCache> disk_;
  std::mutex prelude_mutex_;
  std::unique_ptr<ScratchDirectory> prelude_dir_;  // holds the prelude's file once there is one
  std::string prelude_key_;  // the toolchain's prelude key once decided for it
  SingleFlight<emulator::HostLaunchFunction> loaded_;  // by key: one compile in flight per key
  CacheStats stats_;
};

}  // namespace flashjit::detail
