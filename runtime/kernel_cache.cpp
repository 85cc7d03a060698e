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
    case CacheSource::memory:
      return "memory";
    case CacheSource::disk:
      return "disk";
    case CacheSource::compiled:
      return "compiled";
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
  auto result = loaded_.get(key, [&] { return load_or_compile(spec, templates, key); });
  if (result.computed) return result.value;
  ++stats_.memory_hits;
  return {result.value.entry, CacheSource::memory};
}

std::optional<CacheLookup> KernelCache::find(const KernelSpec& spec) {
  validate_arch(spec.arch);
  const TemplateSet& templates = TemplateSet::active();
  const std::string key = kernel_cache_key(spec, templates);
  if (std::optional<CacheLookup> held = loaded_.find(key)) {
    ++stats_.memory_hits;
    return CacheLookup{held->entry, CacheSource::memory};
  }
  std::optional<CacheLookup> hit = from_disk(disk_path(spec, key), key);
  if (!hit) return std::nullopt;
  // Remembered as get() remembers it; should another thread have compiled the key meanwhile,
  // its entry (the same kernel) is the one kept.
  auto result = loaded_.get(key, [&] { return *hit; });
  return result.computed ? *hit : CacheLookup{result.value.entry, CacheSource::memory};
}

std::filesystem::path KernelCache::disk_path(const KernelSpec& spec, const std::string& key) const {
  return disk_ ? disk_->entry_path(spec.arch, spec.display_name(), key) : std::filesystem::path();
}

std::optional<CacheLookup> KernelCache::from_disk(const std::filesystem::path& path,
                                                  const std::string& key) {
  if (!disk_) return std::nullopt;
  std::optional<CacheEntry> entry = disk_->load(path, key);
  if (!entry) return std::nullopt;
  ++stats_.disk_hits;
  return CacheLookup{std::make_shared<const CacheEntry>(std::move(*entry)), CacheSource::disk};
}

CacheLookup KernelCache::load_or_compile(const KernelSpec& spec, const TemplateSet& templates,
                                         const std::string& key) {
  const std::filesystem::path path = disk_path(spec, key);
  if (auto hit = from_disk(path, key)) return *hit;
  if (!options_.allow_compile) {
    throw Error(ErrorKind::cache, "kernel " + spec.display_name() +
                                      " is not in the cache and FLASHJIT_NO_JIT is set; warm "
                                      "the cache with `flashjit compile` first");
  }
  // Another process may be compiling this key: wait for its lock, then look again.
  DiskCache::KeyLock lock = disk_ ? disk_->lock(key) : DiskCache::KeyLock();
  if (auto hit = from_disk(path, key)) return *hit;
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
