#pragma once
// Compiled kernels by key: memory first, then disk, then NVRTC (docs/cache.md).
// In a process, one compile per key is in flight at a time; lookups of other keys never wait
// behind it. Across processes, a per-key file lock lets one compile while the others wait.
#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "compiler.hpp"
#include "disk_cache.hpp"
#include "kernel_spec.hpp"
#include "single_flight.hpp"
#include "template_sources.hpp"

namespace flashjit::detail {

/// The cache key of `spec` compiled from `templates`: XXH3-128 over the cache format, the
/// flashjit version, every template file's bytes, the translation unit, the name expression,
/// the sorted NVRTC options, the target arch, the NVRTC version and the codegen environment.
std::string kernel_cache_key(const KernelSpec& spec, const TemplateSet& templates);

/// Where a lookup found its kernel.
enum class CacheSource { memory, disk, compiled };

/// The name printed for a source: "memory", "disk", "compiled".
const char* cache_source_name(CacheSource source);

/// A kernel and how it was obtained.
struct CacheLookup {
  std::shared_ptr<const CacheEntry> entry;
  CacheSource source = CacheSource::compiled;
};

/// Counters for tests and the command's summary.
struct CacheStats {
  std::atomic<int> memory_hits{0};
  std::atomic<int> disk_hits{0};
  std::atomic<int> compiles{0};
};

class KernelCache {
 public:
  struct Options {
    std::filesystem::path dir;  ///< disk cache root
    bool use_disk = true;       ///< false: memory only (FLASHJIT_ALWAYS_COMPILE)
    bool allow_compile = true;  ///< false: a miss is an error (FLASHJIT_NO_JIT)
    std::chrono::milliseconds lock_timeout{std::chrono::seconds(120)};
  };

  /// Options from the environment: FLASHJIT_CACHE_DIR (or the XDG default),
  /// FLASHJIT_ALWAYS_COMPILE, FLASHJIT_NO_JIT.
  static Options options_from_environment();
  /// The process-wide cache, configured from the environment on first use.
  static KernelCache& process_cache();

  explicit KernelCache(Options options);

  /// The kernel for `spec` compiled from the active templates.
  CacheLookup get(const KernelSpec& spec);
  /// The kernel for `spec` compiled from `templates`.
  CacheLookup get(const KernelSpec& spec, const TemplateSet& templates);
  /// The kernel for `spec` if memory or the disk holds it (nullopt otherwise): get() without
  /// the compile, for a caller that looks for every kernel of a call on its own thread first
  /// and gives only the missing ones to a compile pool (a disk hit costs less than a thread).
  std::optional<CacheLookup> find(const KernelSpec& spec);

  const Options& options() const { return options_; }
  /// The disk part, or nullptr when the disk is bypassed.
  DiskCache* disk() { return disk_ ? &*disk_ : nullptr; }
  const CacheStats& stats() const { return stats_; }

 private:
  CacheLookup load_or_compile(const KernelSpec& spec, const TemplateSet& templates,
                              const std::string& key);
  /// Where the disk keeps `spec`'s entry under `key` (empty without a disk).
  std::filesystem::path disk_path(const KernelSpec& spec, const std::string& key) const;
  /// The entry the disk holds for `key` at `path`, counted as a disk hit; nullopt without one
  /// (or without a disk).
  std::optional<CacheLookup> from_disk(const std::filesystem::path& path, const std::string& key);

  Options options_;
  std::optional<DiskCache> disk_;
  SingleFlight<CacheLookup> loaded_;  // by key: one compile in flight per key
  CacheStats stats_;
};

}  // namespace flashjit::detail
