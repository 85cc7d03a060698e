#include "host_kernel_cache.hpp"

#include <chrono>
#include <cstdio>

#include "flashjit/error.hpp"
#include "host_kernel_build.hpp"
#include "log.hpp"
#include "shared_object.hpp"
#include "template_sources.hpp"

namespace flashjit::detail {
namespace {

emulator::HostLaunchFunction load(const std::string& bytes, const std::string& name) {
  using Entry = emulator::HostLaunchFunction (*)();
  const auto entry = reinterpret_cast<Entry>(load_shared_object(bytes, name, kHostKernelEntry));
  return entry();
}

/// The prelude's cache entries' name, and its file's name beside the compiles.
constexpr const char* kPreludeName = "host_prelude";
constexpr const char* kPreludeFile = "host_prelude.hpp.gch";

CacheEntry built_prelude(const HostToolchain& toolchain, const std::string& key, DiskCache& disk,
                         const std::filesystem::path& path) {
  emit_message(MessageKind::notice, std::string("precompiling the emulator's headers with ") +
                                        toolchain.compiler.path.string() +
                                        " (once a cache; kernels compile faster with them)");
  CacheEntry entry;
  entry.key = key;
  entry.display_name = kPreludeName;
  entry.op = kPreludeName;
  entry.arch = kHostArch;
  entry.kernel.cubin = build_host_prelude(toolchain);
  disk.store(path, entry);
  return entry;
}

}  // namespace

HostKernelCache& HostKernelCache::process_cache() {
  static HostKernelCache cache(KernelCache::options_from_environment());
  return cache;
}

HostKernelCache::HostKernelCache(KernelCache::Options options) : options_(std::move(options)) {
  if (options_.use_disk) disk_.emplace(options_.dir, options_.lock_timeout);
}

emulator::HostLaunchFunction HostKernelCache::get(const KernelSpec& spec,
                                                  const HostToolchain& toolchain) {
  const std::string key = host_kernel_key(spec, toolchain, TemplateSet::active());
  auto result = loaded_.get(key, [&] { return load_or_compile(spec, toolchain, key); });
  if (!result.computed) ++stats_.memory_hits;
  return result.value;
}

std::optional<emulator::HostLaunchFunction> HostKernelCache::from_disk(
    const std::filesystem::path& path, const std::string& key, const std::string& name) {
  if (!disk_) return std::nullopt;
  std::optional<CacheEntry> entry = disk_->load(path, key);
  if (!entry) return std::nullopt;
  try {
    const emulator::HostLaunchFunction launch = load(entry->kernel.cubin, name);
    ++stats_.disk_hits;
    return launch;
  } catch (const Error& error) {  // intact but unloadable (a system library changed): rebuild
    warn_once("host-kernel-unloadable:" + path.string(),
              std::string(error.what()) + "; compiling it again");
    return std::nullopt;
  }
}

emulator::HostLaunchFunction HostKernelCache::load_or_compile(const KernelSpec& spec,
                                                              const HostToolchain& toolchain,
                                                              const std::string& key) {
  const std::string name = spec.readable_name + "." + kHostArch;
  const std::filesystem::path path =
      disk_ ? disk_->entry_path(kHostArch, name, key) : std::filesystem::path();
  if (auto hit = from_disk(path, key, name)) return *hit;
  if (!options_.allow_compile) {
    throw Error(ErrorKind::cache, "kernel " + name +
                                      " is not in the cache and FLASHJIT_NO_JIT is set; run it "
                                      "on the emulator once without FLASHJIT_NO_JIT to cache it");
  }
  // Another process may be compiling this key: wait for its lock, then look again.
  DiskCache::KeyLock lock = disk_ ? disk_->lock(key) : DiskCache::KeyLock();
  if (auto hit = from_disk(path, key, name)) return *hit;
  emit_message(MessageKind::notice, "compiling " + spec.readable_name + " for the emulator with " +
                                        toolchain.compiler.path.string() +
                                        (disk_ && disk_->writable() ? " (cached afterwards)" : ""));
  const auto start = std::chrono::steady_clock::now();
  CacheEntry entry;
  entry.key = key;
  entry.display_name = name;
  entry.op = spec.op;
  entry.arch = kHostArch;
  entry.kernel.lowered_name = kHostKernelEntry;
  entry.kernel.cubin =
      build_host_kernel(spec, toolchain, TemplateSet::active(), prelude(toolchain));
  entry.kernel.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ++stats_.compiles;
  // Loaded before it is stored: an object that cannot be loaded is not cached.
  const emulator::HostLaunchFunction launch = load(entry.kernel.cubin, name);
  if (disk_) disk_->store(path, entry);
  return launch;
}

bool HostKernelCache::holds_host_kernels() const {
  std::error_code ec;
  const std::filesystem::path dir = disk_->entry_path(kHostArch, "", "").parent_path();
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    if (file.path().filename().string().rfind(kPreludeName, 0) != 0) return true;
  }
  return false;
}

std::filesystem::path HostKernelCache::prelude(const HostToolchain& toolchain) {
  if (!disk_ || !takes_gch_prelude(toolchain.compiler)) return {};
  const std::string key = host_prelude_key(toolchain);
  const std::lock_guard<std::mutex> guard(prelude_mutex_);
  if (key == prelude_key_) return prelude_dir_ ? prelude_dir_->path() / kPreludeFile : "";
  if (!holds_host_kernels()) return {};
  prelude_key_ = key;  // decided for this toolchain: a prelude, or (after a warning) none
  prelude_dir_.reset();
  const std::filesystem::path path = disk_->entry_path(kHostArch, kPreludeName, key);
  try {
    std::optional<CacheEntry> entry = disk_->load(path, key);
    if (!entry) {
      DiskCache::KeyLock lock = disk_->lock(key);
      entry = disk_->load(path, key);
      if (!entry) entry = built_prelude(toolchain, key, *disk_, path);
    }
    auto dir = std::make_unique<ScratchDirectory>();
    if (int error = replace_file_atomically(dir->path() / kPreludeFile, entry->kernel.cubin,
                                            false)) {
      throw Error(ErrorKind::io, "cannot write the precompiled prelude into " +
                                     dir->path().string() + ": " + errno_text(error));
    }
    prelude_dir_ = std::move(dir);
  } catch (const Error& error) {
    warn_once("host-prelude", std::string(error.what()) +
                                  "; compiling kernels for the emulator without it (slower)");
    return {};
  }
  return prelude_dir_->path() / kPreludeFile;
}

}  // namespace flashjit::detail
