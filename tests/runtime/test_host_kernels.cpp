// The emulator backend running specs outside its build-time table by compiling them with the
// host compiler (runtime/host_*.cpp): a forward at head dim 72 matches the float64 reference;
// a new cache loads it from disk without compiling; a damaged file is recompiled, never
// loaded; FLASHJIT_NO_JIT and FLASHJIT_ALWAYS_COMPILE as for cubins; one compile per key; a
// compile failure carries the compiler's log; with no compiler the error says how to get one
// and the build-time table still serves. Each host compile takes a second or two.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/attention_forward.hpp"
#include "attention/check/attention_case.hpp"
#include "common/builtin_kernels.hpp"
#include "flashjit/flashjit.hpp"
#include "runtime/cache_file.hpp"
#include "runtime/emulated_kernel_table.hpp"
#include "runtime/executor.hpp"
#include "runtime/host_kernel_build.hpp"
#include "runtime/host_kernel_cache.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using flashjit::testing::ScopedEnv;
using flashjit::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Head dim 72 is not built for the emulator (the ops' emulated instances): every head dim the GPU
// path accepts should run anyway.
const kernels::ForwardConfig kConfig72{DType::bf16, 72, 64, 32, 4, 1, MaskKind::none,
                                       false};

detail::KernelSpec spec72() { return kernels::forward_spec(kConfig72, detail::kEmulatorArch); }

testing::ForwardCase small_case(int head_dim) {
  testing::ForwardCase c;
  c.problem.batch = 1;
  c.problem.heads_q = c.problem.heads_kv = 1;
  c.problem.seqlen_q = c.problem.seqlen_k = 128;
  c.problem.head_dim = head_dim;
  return c;
}

Runtime emulator_runtime() { return Runtime(RuntimeOptions{.backend = Backend::emulator}); }

detail::HostToolchain toolchain() {
  const detail::HostToolchainLookup lookup = detail::find_host_toolchain();
  REQUIRE_MESSAGE(lookup.toolchain.has_value(), lookup.problem);
  return *lookup.toolchain;
}

detail::KernelCache::Options cache_options(const fs::path& dir) {
  detail::KernelCache::Options options;
  options.dir = dir;
  return options;
}

/// Every host kernel entry file under the cache root `dir`.
std::vector<fs::path> host_entries(const fs::path& dir) {
  std::vector<fs::path> entries;
  std::error_code ec;
  for (const auto& file : fs::directory_iterator(dir / "v1" / "kernels" / "host", ec)) {
    entries.push_back(file.path());
  }
  return entries;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("a forward the emulator was not built with is compiled for the host, runs and matches") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv compiler_env("FLASHJIT_HOST_CXX", nullptr);  // c++ on PATH
  Runtime runtime = emulator_runtime();
  const detail::KernelSpec spec = spec72();
  REQUIRE(kernels::emulated::builtin_kernels().find(spec.name_expression) == nullptr);
  CHECK(detail::backend_of(runtime).executor().has_kernel(spec));

  const detail::CacheStats& stats = detail::HostKernelCache::process_cache().stats();
  const int compiles = stats.compiles;
  const testing::ForwardVerdict verdict =
      testing::run_forward_case(runtime, small_case(72), kConfig72);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  CHECK(stats.compiles == compiles + 1);
  REQUIRE(host_entries(cache_dir.path()).size() == 1);
  // A second runtime in the process finds the loaded object in memory.
  Runtime second = emulator_runtime();
  CHECK(testing::run_forward_case(second, small_case(72), kConfig72).ok);
  CHECK(stats.compiles == compiles + 1);

  // A new cache, as in a new process, loads the object from disk without compiling.
  detail::HostKernelCache fresh(cache_options(cache_dir.path()));
  CHECK(bool(fresh.get(spec, toolchain())));
  CHECK(fresh.stats().disk_hits == 1);
  CHECK(fresh.stats().compiles == 0);
}

TEST_CASE("a damaged host kernel file is recompiled, never loaded") {
  const detail::KernelSpec spec = spec72();
  const detail::HostToolchain tools = toolchain();
  for (const char* damage : {"garbled", "truncated"}) {
    const std::string damage_name = damage;
    CAPTURE(damage_name);
    TempDir dir;
    detail::HostKernelCache(cache_options(dir.path())).get(spec, tools);
    REQUIRE(host_entries(dir.path()).size() == 1);
    const fs::path path = host_entries(dir.path()).front();
    std::string bytes = read_bytes(path);
    if (damage_name == "garbled") bytes[bytes.size() / 2] ^= 0x5a;  // inside the object
    if (damage_name == "truncated") bytes.resize(bytes.size() - 4096);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

    detail::HostKernelCache reader(cache_options(dir.path()));
    CHECK(bool(reader.get(spec, tools)));
    CHECK(reader.stats().disk_hits == 0);
    CHECK(reader.stats().compiles == 1);
    const std::string key = detail::host_kernel_key(spec, tools, detail::TemplateSet::active());
    CHECK(detail::decode_cache_file(read_bytes(path), key).has_value());  // replaced, valid
  }
}

TEST_CASE("host kernels: FLASHJIT_NO_JIT refuses a miss, FLASHJIT_ALWAYS_COMPILE skips the disk") {
  TempDir dir;
  const detail::HostToolchain tools = toolchain();
  detail::KernelCache::Options strict = cache_options(dir.path() / "cache");
  strict.allow_compile = false;
  try {
    detail::HostKernelCache(strict).get(spec72(), tools);
    FAIL("a miss compiled although compiling is off");
  } catch (const Error& error) {
    CHECK(error.kind() == ErrorKind::cache);
    CHECK(std::string(error.what()).find("FLASHJIT_NO_JIT") != std::string::npos);
  }

  detail::KernelCache::Options memory_only = cache_options(dir.path() / "memory");
  memory_only.use_disk = false;
  detail::HostKernelCache cache(memory_only);
  // One compile however many threads ask at once; the others wait for it.
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { cache.get(spec72(), tools); });
  for (std::thread& thread : threads) thread.join();
  CHECK(cache.stats().compiles == 1);
  CHECK(cache.stats().memory_hits == 3);
  CHECK_FALSE(fs::exists(dir.path() / "memory"));
}

TEST_CASE("a host compile that fails says so with the compiler's log") {
  TempDir dir;
  detail::KernelSpec spec = spec72();
  spec.name_expression = "flashjit::no_such_kernel<72>";
  spec.readable_name = "attention_forward.no_such_kernel";
  try {
    detail::HostKernelCache(cache_options(dir.path())).get(spec, toolchain());
    FAIL("expected a compile error");
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(error.kind() == ErrorKind::compile);
    CHECK(message.find("failed to compile attention_forward.no_such_kernel") != std::string::npos);
    CHECK(message.find("no_such_kernel") != std::string::npos);
    CHECK(message.find("kernel.cpp:") != std::string::npos);     // the log, file and line
    CHECK(message.find("flashjit-host-") == std::string::npos);  // no scratch path
  }
  CHECK(host_entries(dir.path()).empty());
}

TEST_CASE("no host compiler: a spec outside the table is refused saying how, the table serves") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv compiler_env("FLASHJIT_HOST_CXX", "/nonexistent/c++");
  Runtime runtime = emulator_runtime();
  const int compiles = detail::HostKernelCache::process_cache().stats().compiles;
  CHECK_FALSE(detail::backend_of(runtime).executor().has_kernel(spec72()));
  try {
    testing::run_forward_case(runtime, small_case(72), kConfig72);
    FAIL("expected an error");
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(error.kind() == ErrorKind::unsupported);
    CHECK(message.find("FLASHJIT_HOST_CXX is '/nonexistent/c++'") != std::string::npos);
    CHECK(message.find("Set FLASHJIT_HOST_CXX to a C++20 compiler") != std::string::npos);
  }
  // Head dim 64's default is built in.
  const testing::ForwardVerdict verdict = testing::run_forward_case(runtime, small_case(64));
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  CHECK(detail::HostKernelCache::process_cache().stats().compiles == compiles);
  CHECK(host_entries(cache_dir.path()).empty());
}

// GCC's precompiled emulator headers (docs/emulator.md): not made for a cache's first host
// kernel, made once with the second and used by every compile after it, in this process and
// the next; a damaged one is rebuilt. The compiler is a script that runs the real one with -H
// (GCC prints "! <file>.gch" for a precompiled header it uses) and logs what it saw.
TEST_CASE("host kernels: the precompiled prelude is made once a cache holds a kernel, then used") {
  const detail::HostToolchain real = toolchain();
#if defined(__GNUC__) && !defined(__clang__)
  REQUIRE(detail::takes_gch_prelude(real.compiler));  // c++ on PATH: the GCC that built this
#endif
  TempDir dir;
  const fs::path log = dir.path() / "compiles.log", script = dir.path() / "logging-c++";
  std::ofstream(script) << "#!/bin/sh\n"
                           "case \"$*\" in *--version*) exec '"
                        << real.compiler.path.string() << "' \"$@\";; esac\n"
                        << "out=$('" << real.compiler.path.string() << "' -H \"$@\" 2>&1)\n"
                        << "status=$?\ncase \"$*\" in *c++-header*) echo header >> '"
                        << log.string() << "';; *) echo \"$out\" | grep -q '^! .*prelude' "
                        << "&& echo kernel-with-prelude >> '" << log.string()
                        << "' || echo kernel >> '" << log.string() << "';; esac\n"
                        << "[ $status = 0 ] || echo \"$out\" >&2\nexit $status\n";
  fs::permissions(script, fs::perms::owner_all);
  detail::HostToolchain tools = real;
  tools.compiler.path = tools.compiler.resolved = script;
  const auto spec = [](int head_dim) {
    kernels::ForwardConfig config = kConfig72;
    config.head_dim = head_dim;
    return kernels::forward_spec(config, detail::kEmulatorArch);
  };
  const auto preludes = [&] {
    std::vector<fs::path> found;
    for (const fs::path& path : host_entries(dir.path() / "cache")) {
      if (path.filename().string().starts_with("host_prelude-")) found.push_back(path);
    }
    return found;
  };
  const auto compiles = [&] {
    std::ifstream in(log);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  };
  using Lines = std::vector<std::string>;
  {
    detail::HostKernelCache cache(cache_options(dir.path() / "cache"));
    cache.get(spec(72), tools);
    CHECK(preludes().empty());
    if (!detail::takes_gch_prelude(real.compiler)) {
      MESSAGE("the host compiler is not GCC: no precompiled prelude");
      cache.get(spec(88), tools);
      CHECK(preludes().empty());
      return;
    }
    cache.get(spec(88), tools);
    REQUIRE(preludes().size() == 1);
    CHECK(compiles() == Lines{"kernel", "header", "kernel-with-prelude"});
  }
  detail::HostKernelCache next(cache_options(dir.path() / "cache"));  // as a new process
  next.get(spec(104), tools);
  CHECK(compiles().back() == "kernel-with-prelude");
  CHECK(compiles().size() == 4);  // loaded, not made again
  const fs::path prelude = preludes().front();
  std::string bytes = read_bytes(prelude);
  bytes[bytes.size() / 2] ^= 0x5a;
  std::ofstream(prelude, std::ios::binary | std::ios::trunc) << bytes;
  detail::HostKernelCache repaired(cache_options(dir.path() / "cache"));
  repaired.get(spec(120), tools);
  CHECK(compiles() == Lines{"kernel", "header", "kernel-with-prelude", "kernel-with-prelude",
                            "header", "kernel-with-prelude"});
  REQUIRE(preludes().size() == 1);
  CHECK(detail::decode_cache_file(read_bytes(preludes().front()), "").has_value());
}
