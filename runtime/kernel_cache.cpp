#include "kernel_cache.hpp"

#include "env.hpp"
#include "flashjit/error.hpp"
#include "flashjit/version.hpp"
#include "hashing.hpp"

namespace flashjit::detail {

std::string kernel_cache_key(const KernelSpec& spec, const TemplateSet& templates) {
  KeyBuilder key;
  key.add("flashjit-kernel").add(std::to_string(kCacheFormatVersion)).add(kVersion);
  key.add(templates.digest()).add(spec.main_source()).add(spec.name_expression);
  for (const std::string& option : nvrtc_options(spec)) key.add(option);
  key.add(spec.arch).add(nvrtc_version());
  for (const std::string& variable : codegen_environment()) key.add(variable);
  return key.hex_digest();
}

const char* cache_source_name(CacheSource source) {
  switch (source) {
    case CacheSource::memory: return "memory";
    case CacheSource::disk: return "disk";
    case CacheSource::compiled: return "compiled";
  }
  return "?";
}

KernelCache::Options KernelCache::options_from_environment() {
  Options options;
  options.dir = DiskCache::default_root();
  options.use_disk = !env_flag("FLASHJIT_ALWAYS_COMPILE");
  options.allow_compile = !env_flag("FLASHJIT_NO_JIT");
  return options;
}

KernelCache& KernelCache::process_cache() {
  static KernelCache cache(options_from_environment());
  return cache;
}

KernelCache::KernelCache(Options options) : options_(std::move(options)) {
  if (options_.use_disk) disk_.emplace(options_.dir, options_.lock_timeout);
}

CacheLookup KernelCache::get(const KernelSpec& spec) { return get(spec, TemplateSet::active()); }

CacheLookup KernelCache::get(const KernelSpec& spec, const TemplateSet& templates) {
  validate_arch(spec.arch);
  const std::string key = kernel_cache_key(spec, templates);
  std::promise<CacheLookup> promise;
  {
    std::unique_lock lock(mutex_);
    if (auto hit = memory_.find(key); hit != memory_.end()) {
      ++stats_.memory_hits;
      return {hit->second, CacheSource::memory};
    }
    if (auto pending = in_flight_.find(key); pending != in_flight_.end()) {
      std::shared_future<CacheLookup> future = pending->second;
      lock.unlock();  // wait for the other thread's compile without blocking other keys
      ++stats_.memory_hits;
      return {future.get().entry, CacheSource::memory};
    }
    in_flight_.emplace(key, promise.get_future().share());
  }
  try {
    CacheLookup result = load_or_compile(spec, templates, key);
    std::lock_guard lock(mutex_);
    memory_.emplace(key, result.entry);
    in_flight_.erase(key);
    promise.set_value(result);
    return result;
  } catch (...) {
    std::lock_guard lock(mutex_);
    in_flight_.erase(key);
    promise.set_exception(std::current_exception());
    throw;
  }
}

CacheLookup KernelCache::load_or_compile(const KernelSpec& spec, const TemplateSet& templates,
                                         const std::string& key) {
  const std::filesystem::path path =
      disk_ ? disk_->entry_path(spec.arch, spec.display_name(), key) : std::filesystem::path();
  auto from_disk = [&]() -> std::optional<CacheLookup> {
    if (!disk_) return std::nullopt;
    std::optional<CacheEntry> entry = disk_->load(path, key);
    if (!entry) return std::nullopt;
    ++stats_.disk_hits;
    return CacheLookup{std::make_shared<const CacheEntry>(std::move(*entry)), CacheSource::disk};
  };
  if (auto hit = from_disk()) return *hit;
  if (!options_.allow_compile) {
    throw Error(ErrorKind::cache, "kernel " + spec.display_name() +
                                      " is not in the cache and FLASHJIT_NO_JIT is set; warm "
                                      "the cache with `flashjit compile` first");
  }
  // Another process may be compiling this key: wait for its lock, then look again.
  DiskCache::KeyLock lock = disk_ ? disk_->lock(key) : DiskCache::KeyLock();
  if (auto hit = from_disk()) return *hit;
  auto entry = std::make_shared<CacheEntry>();
  entry->key = key;
  entry->display_name = spec.display_name();
  entry->op = spec.op;
  entry->arch = spec.arch;
  entry->kernel = compile_kernel(spec, templates);
  ++stats_.compiles;
  if (disk_) disk_->store(path, *entry);
  return {entry, CacheSource::compiled};
}

}  // namespace flashjit::detail
