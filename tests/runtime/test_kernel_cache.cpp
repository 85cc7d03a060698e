// The kernel cache in one process: memory, disk, corruption, permissions, environment.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "flashjit/error.hpp"
#include "runtime/kernel_cache.hpp"
#include "support/kernel_fixtures.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using namespace flashjit::detail;
using flashjit::testing::cache_options;
using flashjit::testing::sample_spec;
using flashjit::testing::TempDir;

namespace {

std::filesystem::path entry_file(KernelCache& cache, const KernelSpec& spec) {
  return cache.disk()->entry_path(spec.arch, spec.display_name(),
                                  kernel_cache_key(spec, TemplateSet::active()));
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

unsigned mode_of(const std::filesystem::path& path) {
  struct stat info {};
  ::stat(path.c_str(), &info);
  return info.st_mode & 0777;
}

}  // namespace

TEST_CASE("a miss compiles and writes, and later lookups hit memory, then disk") {
  TempDir dir;
  const KernelSpec spec = sample_spec();
  KernelCache first(cache_options(dir.path() / "cache"));
  CHECK(first.get(spec).source == CacheSource::compiled);
  CHECK(first.get(spec).source == CacheSource::memory);
  CHECK(std::filesystem::exists(entry_file(first, spec)));

  KernelCache second(cache_options(dir.path() / "cache"));  // a new process, in effect
  CacheLookup hit = second.get(spec);
  CHECK(hit.source == CacheSource::disk);
  CHECK(hit.entry->kernel.cubin == first.get(spec).entry->kernel.cubin);
  CHECK(second.stats().compiles == 0);
}

TEST_CASE("find reads memory and the disk and never compiles") {
  TempDir dir;
  const KernelSpec spec = sample_spec();
  KernelCache first(cache_options(dir.path() / "cache"));
  CHECK_FALSE(first.find(spec).has_value());
  CHECK(first.stats().compiles == 0);
  CHECK(first.get(spec).source == CacheSource::compiled);
  REQUIRE(first.find(spec).has_value());
  CHECK(first.find(spec)->source == CacheSource::memory);

  KernelCache second(cache_options(dir.path() / "cache"));  // a new process, in effect
  const std::optional<CacheLookup> hit = second.find(spec);
  REQUIRE(hit.has_value());
  CHECK(hit->source == CacheSource::disk);
  CHECK(hit->entry->kernel.cubin == first.get(spec).entry->kernel.cubin);
  CHECK(second.get(spec).source == CacheSource::memory);  // remembered, as get() remembers
  CHECK(second.stats().compiles == 0);

  write_bytes(entry_file(second, spec), "garbled");
  KernelCache third(cache_options(dir.path() / "cache"));
  CHECK_FALSE(third.find(spec).has_value());  // a damaged file is no hit, and not compiled
  CHECK(third.stats().compiles == 0);
}

TEST_CASE("the cache directory is created private (0700)") {
  TempDir dir;
  KernelCache cache(cache_options(dir.path() / "a" / "b"));
  CHECK(cache.disk()->writable());
  CHECK(mode_of(dir.path() / "a" / "b") == 0700);
  CHECK(mode_of(dir.path() / "a" / "b" / "v1" / "kernels") == 0700);
}

TEST_CASE("a damaged or foreign cache file is recompiled, never loaded") {
  const KernelSpec spec = sample_spec();
  const std::string key = kernel_cache_key(spec, TemplateSet::active());
  for (const char* damage : {"truncated", "garbled", "wrong version", "wrong key", "empty"}) {
    const std::string damage_name = damage;
    CAPTURE(damage_name);
    TempDir dir;
    KernelCache writer(cache_options(dir.path()));
    const std::string lowered_name = writer.get(spec).entry->kernel.lowered_name;
    const std::filesystem::path path = entry_file(writer, spec);
    const std::string good = read_bytes(path);
    std::string damaged = good;
    if (damage == std::string("truncated")) damaged.resize(good.size() / 2);
    if (damage == std::string("garbled")) damaged[good.size() - 100] ^= 1;
    if (damage == std::string("wrong version")) damaged[8] = 99;
    if (damage == std::string("wrong key")) {  // another kernel's valid file under this name
      writer.get(sample_spec(1));
      damaged = read_bytes(entry_file(writer, sample_spec(1)));
    }
    if (damage == std::string("empty")) damaged.clear();
    write_bytes(path, damaged);

    KernelCache reader(cache_options(dir.path()));
    CacheLookup lookup = reader.get(spec);
    CHECK(lookup.source == CacheSource::compiled);
    CHECK(lookup.entry->kernel.lowered_name == lowered_name);
    // (NVRTC's output is not always byte-identical across compiles, so compare with the file.)
    auto rewritten = decode_cache_file(read_bytes(path), key);  // replaced by a valid file
    REQUIRE(rewritten.has_value());
    CHECK(rewritten->kernel.cubin == lookup.entry->kernel.cubin);
  }
}

TEST_CASE("a directory writable by other users is refused, and kernels still work") {
  TempDir dir;
  const auto root = dir.path() / "shared";
  std::filesystem::create_directory(root);
  ::chmod(root.c_str(), 0777);
  KernelCache cache(cache_options(root));
  CHECK_FALSE(cache.disk()->readable());
  CHECK_FALSE(cache.disk()->writable());
  CHECK(cache.disk()->degraded_reason().find("writable by other users") != std::string::npos);
  CHECK(cache.get(sample_spec()).source == CacheSource::compiled);
  CHECK(cache.get(sample_spec()).source == CacheSource::memory);
  CHECK(std::filesystem::is_empty(root));
}

TEST_CASE("one compile per key in a process, however many threads ask") {
  TempDir dir;
  KernelCache cache(cache_options(dir.path()));
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { cache.get(sample_spec()); });
  for (std::thread& thread : threads) thread.join();
  CHECK(cache.stats().compiles == 1);
  CHECK(cache.stats().memory_hits == 7);
}

TEST_CASE("FLASHJIT_NO_JIT turns a miss into an error, and hits still work") {
  TempDir dir;
  KernelCache::Options options = cache_options(dir.path());
  options.allow_compile = false;
  KernelCache strict(options);
  try {
    strict.get(sample_spec());
    FAIL("a miss compiled although compiling is off");
  } catch (const Error& error) {
    CHECK(error.kind() == ErrorKind::cache);
    CHECK(std::string(error.what()).find("FLASHJIT_NO_JIT") != std::string::npos);
  }
  KernelCache(cache_options(dir.path())).get(sample_spec());
  CHECK(KernelCache(options).get(sample_spec()).source == CacheSource::disk);
}

TEST_CASE("FLASHJIT_ALWAYS_COMPILE bypasses the disk") {
  TempDir dir;
  KernelCache::Options options = cache_options(dir.path() / "cache");
  options.use_disk = false;
  KernelCache cache(options);
  CHECK(cache.disk() == nullptr);
  CHECK(cache.get(sample_spec()).source == CacheSource::compiled);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "cache"));
}

TEST_CASE("the environment configures the process cache") {
  using flashjit::testing::ScopedEnv;
  ScopedEnv dir("FLASHJIT_CACHE_DIR", "/tmp/flashjit-env-probe");
  ScopedEnv always("FLASHJIT_ALWAYS_COMPILE", "1");
  ScopedEnv no_jit("FLASHJIT_NO_JIT", "0");
  KernelCache::Options options = KernelCache::options_from_environment();
  CHECK(options.dir == "/tmp/flashjit-env-probe");
  CHECK_FALSE(options.use_disk);
  CHECK(options.allow_compile);
}

TEST_CASE("a lock held too long is waited for, then compiled past") {
  TempDir dir;
  KernelCache::Options options = cache_options(dir.path());
  options.lock_timeout = std::chrono::milliseconds(200);
  KernelCache holder(options);
  const std::string key = kernel_cache_key(sample_spec(), TemplateSet::active());
  DiskCache::KeyLock held = holder.disk()->lock(key);
  REQUIRE(held.held());
  KernelCache waiter(options);
  const auto start = std::chrono::steady_clock::now();
  CHECK(waiter.get(sample_spec()).source == CacheSource::compiled);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(200));
}

TEST_CASE("prune removes least recently used entries, and clear removes all") {
  TempDir dir;
  KernelCache cache(cache_options(dir.path()));
  for (int variant = 0; variant < 3; ++variant) cache.get(sample_spec(variant));
  DiskCache& disk = *cache.disk();
  REQUIRE(disk.list().size() == 3);
  // Make variant 1 the oldest.
  const auto oldest = entry_file(cache, sample_spec(1));
  std::filesystem::last_write_time(
      oldest, std::filesystem::file_time_type::clock::now() - std::chrono::hours(5));
  std::uintmax_t total = 0;
  for (const DiskEntryInfo& info : disk.list()) total += info.size;
  auto removed = disk.prune(total - 1);
  REQUIRE(removed.size() == 1);
  CHECK(removed.front().path == oldest);
  CHECK(disk.list().size() == 2);
  CHECK(disk.prune(0).size() == 2);
  KernelCache(cache_options(dir.path())).get(sample_spec(0));  // compiled and written again
  CHECK(disk.clear() == 1);
  CHECK(disk.list().empty());
}

TEST_CASE("verify finds and removes invalid entries") {
  TempDir dir;
  KernelCache cache(cache_options(dir.path()));
  cache.get(sample_spec(0));
  cache.get(sample_spec(1));
  const auto path = entry_file(cache, sample_spec(1));
  write_bytes(path, read_bytes(path).substr(0, 100));
  auto invalid = cache.disk()->verify_and_repair();
  REQUIRE(invalid.size() == 1);
  CHECK(invalid.front().path == path);
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(cache.disk()->list().size() == 1);
}

TEST_CASE("every directory on the way to an entry is checked like the root") {
  TempDir dir;
  const auto root = dir.path() / "cache";
  const KernelSpec spec = sample_spec();
  std::filesystem::path path;
  {
    KernelCache writer(cache_options(root));
    writer.get(spec);
    path = entry_file(writer, spec);
  }
  REQUIRE(std::filesystem::exists(path));
  SUBCASE("an arch directory writable by all: not loaded, and verify removes it whole") {
    ::chmod(path.parent_path().c_str(), 0777);
    KernelCache cache(cache_options(root));
    CHECK(cache.disk()->readable());
    CHECK(cache.get(spec).source == CacheSource::compiled);  // not loaded from there
    const std::vector<DiskEntryInfo> listed = cache.disk()->list();
    REQUIRE(listed.size() == 1);
    CHECK_FALSE(listed.front().entry);
    CHECK(listed.front().problem.find("writable by other users") != std::string::npos);
    const auto invalid = cache.disk()->verify_and_repair();
    CHECK(invalid.size() == 1);
    CHECK_FALSE(std::filesystem::exists(path.parent_path()));
    KernelCache again(cache_options(root));  // recreated private, then used
    CHECK(again.get(spec).source == CacheSource::compiled);
    CHECK(mode_of(path.parent_path()) == 0700);
    CHECK(KernelCache(cache_options(root)).get(spec).source == CacheSource::disk);
  }
  SUBCASE("v1/kernels writable by group: the disk is refused, naming it") {
    const auto kernels = path.parent_path().parent_path();
    ::chmod(kernels.c_str(), 0770);
    KernelCache cache(cache_options(root));
    CHECK_FALSE(cache.disk()->readable());
    CHECK(cache.disk()->degraded_reason().find(kernels.string()) != std::string::npos);
    CHECK(cache.get(spec).source == CacheSource::compiled);
  }
}

TEST_CASE("a directory with an entry's name is invalid: verify removes it, a lookup recompiles") {
  TempDir dir;
  const KernelSpec spec = sample_spec();
  KernelCache cache(cache_options(dir.path()));
  const auto path = entry_file(cache, spec);
  std::filesystem::create_directories(path / "inside");
  const std::vector<DiskEntryInfo> listed = cache.disk()->list();
  REQUIRE(listed.size() == 1);
  CHECK(listed.front().path == path);
  CHECK(listed.front().problem == "not a regular file");
  SUBCASE("verify") {
    CHECK(cache.disk()->verify_and_repair().size() == 1);
    CHECK_FALSE(std::filesystem::exists(path));
  }
  SUBCASE("a lookup replaces it with the compiled entry") {
    CHECK(cache.get(spec).source == CacheSource::compiled);
    CHECK(std::filesystem::is_regular_file(path));
    CHECK(cache.disk()->writable());
  }
}
