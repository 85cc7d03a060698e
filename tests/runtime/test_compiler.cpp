// NVRTC compilation, the resource report, template sets and the cache key's fields.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "attention/attention_forward.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"
#include "runtime/compiler.hpp"
#include "runtime/executor.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"
#include "support/kernel_fixtures.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using namespace flashjit::detail;
using flashjit::testing::sample_spec;
using flashjit::testing::ScopedEnv;
using flashjit::testing::TempDir;

namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

KernelSpec spec_for(const std::string& header, const std::string& name_expression) {
  KernelSpec spec;
  spec.op = "probe";
  spec.header = header;
  spec.name_expression = name_expression;
  spec.readable_name = "probe";
  spec.arch = "sm_90a";
  return spec;
}

}  // namespace

TEST_CASE("a real template compiles to a CUBIN with a resource report") {
  CompiledKernel kernel = compile_kernel(sample_spec(), TemplateSet::embedded());
  CHECK(kernel.cubin.size() > 1000);
  CHECK(kernel.cubin.substr(1, 3) == "ELF");
  CHECK(kernel.lowered_name.rfind("_Z", 0) == 0);
  CHECK(kernel.resources.registers > 0);
  CHECK(kernel.resources.spill_bytes() == 0);
  CHECK(kernel.compile_ms > 0);
}

TEST_CASE("the PTX of a kernel is its arch's, with the instructions the tile library issues") {
  // The forward's sm_80 default at head dim 128: mma.sync fed by ldmatrix from cp.async tiles.
  const kernels::ForwardConfig config =
      kernels::default_forward_config(DType::bf16, 128, MaskKind::none, false, "sm_80");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CAPTURE(arch);
    const std::string ptx =
        compile_ptx(kernels::forward_spec(config, arch), TemplateSet::embedded());
    CHECK(ptx.find(std::string(".target ") + arch + "\n") != std::string::npos);
    CHECK(ptx.find(".entry ") != std::string::npos);
    CHECK(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != std::string::npos);
    CHECK(ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16") != std::string::npos);
    CHECK(ptx.find("cp.async.cg.shared.global") != std::string::npos);
    CHECK(ptx.back() != '\0');
  }
}

TEST_CASE("a template with a syntax error yields NVRTC's log with file and line") {
  TempDir dir;
  write_file(dir.path() / "broken" / "bad.cuh",
             "#pragma once\n"
             "template <int N> __global__ void probe(float* x) {\n"
             "  x[0] = N +;\n"
             "}\n");
  TemplateSet templates = TemplateSet::from_directory(dir.path());
  try {
    compile_kernel(spec_for("broken/bad.cuh", "probe<1>"), templates);
    FAIL("the broken template compiled");
  } catch (const Error& error) {
    CHECK(error.kind() == ErrorKind::compile);
    const std::string message = error.what();
    CHECK_MESSAGE(message.find("broken/bad.cuh(3)") != std::string::npos, message);
    CHECK(message.find("probe") != std::string::npos);
  }
}

TEST_CASE("ptxas' verbose report is parsed") {
  const std::string log =
      "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1kv\n"
      "ptxas         .     24 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem\n";
  ResourceUsage usage = parse_resource_report(log);
  CHECK(usage.registers == 255);
  CHECK(usage.stack_bytes == 24);
  CHECK(usage.spill_store_bytes == 16);
  CHECK(usage.spill_load_bytes == 12);
  CHECK(usage.spill_bytes() == 28);
  CHECK(usage.static_shared_bytes == 4096);
}

TEST_CASE("ptxas' performance advisories are parsed, each once, without the function name") {
  const std::string serialized =
      "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to non wgmma instructions reading accumulator registers of  a wgmma "
      "between start and end of the pipeline stage in the function '_Z1kv'\n";
  const std::string log = serialized +
                          "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90a'\n"
                          "ptxas info    : Used 168 registers, used 16 barriers\n" +
                          serialized +
                          "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async "
                          "instructions are serialized due to insufficient register resources "
                          "for the function '_Z1kv'\n"
                          "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' "
                          "ignored; unable to determine register count at entry.\n";
  const std::vector<std::string> advisories = parse_advisories(log);
  REQUIRE(advisories.size() == 3);
  CHECK(advisories[0] ==
        "C7514: wgmma.mma_async instructions are serialized due to non wgmma instructions reading "
        "accumulator registers of a wgmma between start and end of the pipeline stage");
  CHECK(advisories[1] ==
        "C7512: wgmma.mma_async instructions are serialized due to insufficient register "
        "resources");
  CHECK(advisories[2] ==
        "C7508: 'setmaxnreg' ignored; unable to determine register count at entry.");
  CHECK(parse_resource_report(log).advisories == advisories);
  CHECK(parse_advisories("ptxas info    : Used 40 registers, 4096 bytes smem\n").empty());
  // A line with the words and no code still counts: ptxas's wording is the contract.
  CHECK(parse_advisories("ptxas info    : Potential Performance Loss: something new") ==
        std::vector<std::string>{"ptxas: something new"});
}

TEST_CASE("arch names are validated") {
  for (const char* good : {"sm_80", "sm_86", "sm_90a", "sm_100a", "sm_120"}) {
    CHECK_NOTHROW(validate_arch(good));
  }
  for (const char* bad : {"sm_75", "9.0", "sm90", "sm_90b", "", "compute_90", "sm_", "sm_a", "sm_9",
                          "sm_1000", "sm_9x", "sm_90aa", "xm_90"}) {
    CHECK_THROWS_AS(validate_arch(bad), InvalidArgument);
  }
}

TEST_CASE("a template directory override must exist and hold templates") {
  TempDir dir;
  CHECK_THROWS_AS(TemplateSet::from_directory(dir.path() / "missing"), Error);
  CHECK_THROWS_AS(TemplateSet::from_directory(dir.path()), Error);
  write_file(dir.path() / "a.cuh", "#pragma once\n");
  CHECK(TemplateSet::from_directory(dir.path()).files().size() == 1);
}

TEST_CASE("the embedded templates are the library's own: test-only probes stay out of every key") {
  const TemplateSet& templates = TemplateSet::embedded();
  REQUIRE_FALSE(templates.files().empty());
  for (const TemplateFile& file : templates.files()) {
    INFO(file.name);
    CHECK(file.name.rfind("testing/", 0) == std::string::npos);
  }
}

TEST_CASE("the embedded templates carry the digest their files give, computed at build time") {
  const TemplateSet& templates = TemplateSet::embedded();
  CHECK(templates.digest().size() == 32);
  CHECK(templates.digest() == template_digest(embedded_templates()));
  std::vector<TemplateFile> edited = embedded_templates();
  edited.front().text = edited.front().text.substr(1);
  CHECK(template_digest(edited) != templates.digest());
}

TEST_CASE("a template directory may link its folders (the probe tests assemble one so)") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "real" / "tile");
  write_file(dir.path() / "real" / "tile" / "a.cuh", "#pragma once\n");
  std::filesystem::create_directories(dir.path() / "linked");
  std::filesystem::create_directory_symlink(dir.path() / "real" / "tile",
                                            dir.path() / "linked" / "tile");
  const TemplateSet linked = TemplateSet::from_directory(dir.path() / "linked");
  REQUIRE(linked.files().size() == 1);
  CHECK(linked.files()[0].name == "tile/a.cuh");
}

TEST_CASE("every field of the cache key changes the key") {
  const TemplateSet& templates = TemplateSet::embedded();
  const KernelSpec base = sample_spec(0);
  const std::string key = kernel_cache_key(base, templates);
  CHECK(key.size() == 32);
  CHECK(kernel_cache_key(base, templates) == key);

  SUBCASE("arch") {
    KernelSpec other = base;
    other.arch = "sm_80";
    CHECK(kernel_cache_key(other, templates) != key);
  }
  SUBCASE("name expression") { CHECK(kernel_cache_key(sample_spec(1), templates) != key); }
  SUBCASE("options") {
    KernelSpec other = base;
    other.options.push_back("-DFLASHJIT_PROBE=1");
    CHECK(kernel_cache_key(other, templates) != key);
  }
  SUBCASE("template bytes") {
    TempDir dir;
    for (const TemplateFile& file : templates.files()) {
      write_file(dir.path() / file.name, std::string(file.text));
    }
    CHECK(kernel_cache_key(base, TemplateSet::from_directory(dir.path())) == key);
    const TemplateFile& first = templates.files().front();
    write_file(dir.path() / first.name, std::string(first.text) + "\n// edited\n");
    CHECK(kernel_cache_key(base, TemplateSet::from_directory(dir.path())) != key);
  }
  SUBCASE("a codegen environment variable, and only those") {
    {
      ScopedEnv lineinfo("FLASHJIT_LINEINFO", "1");
      CHECK(kernel_cache_key(base, templates) != key);
    }
    ScopedEnv cache_dir("FLASHJIT_CACHE_DIR", "/somewhere/else");
    CHECK(kernel_cache_key(base, templates) == key);
  }
}

TEST_CASE("without a driver or GPU, running says which is missing and compiling still works") {
  const flashjit::SystemInfo system = flashjit::query_system();
  if (!system.devices.empty()) return;  // this machine has a GPU: nothing to show here
  CHECK(!system.unavailable_reason.empty());
  try {
    flashjit::Runtime runtime;
    FAIL("a Runtime opened without a GPU");
  } catch (const Error& error) {
    CHECK((error.kind() == ErrorKind::no_driver || error.kind() == ErrorKind::no_device));
    const std::string message = error.what();
    const bool says_which = message.find("no CUDA driver") != std::string::npos ||
                            message.find("no GPU") != std::string::npos;
    CHECK_MESSAGE(says_which, message);
  }
  CHECK_NOTHROW(compile_kernel(sample_spec(), TemplateSet::embedded()));
}

TEST_CASE("compile workers: one a hardware thread, as far as memory holds them, at least one") {
  using flashjit::detail::kCompileBytes;
  using flashjit::detail::workers_for;
  constexpr long long kGiB = 1LL << 30;
  static_assert(kCompileBytes == kGiB);
  CHECK(workers_for(16, 128 * kGiB, 64) == 16);  // a GPU host: 16 compiles, not 4
  CHECK(workers_for(2, 8 * kGiB, 64) == 2);      // CI's two cores
  CHECK(workers_for(16, 6 * kGiB, 64) == 6);     // memory for six
  CHECK(workers_for(128, 1024 * kGiB, 64) == 64);
  CHECK(workers_for(16, 0, 64) == 16);  // memory unknown: the threads
  CHECK(workers_for(0, 0, 64) == 1);    // hardware_concurrency unknown
  CHECK(workers_for(8, kGiB / 2, 64) == 1);
  CHECK(flashjit::detail::default_workers() >= 1);
}

TEST_CASE("one worker runs every job on the calling thread, in order, an error as its outcome") {
  const std::thread::id caller = std::this_thread::get_id();
  bool on_caller = true;
  std::vector<int> seen;
  run_ordered<int>(
      3, 1,
      [&](int i) {
        on_caller = on_caller && std::this_thread::get_id() == caller;
        if (i == 1) throw std::runtime_error("job 1 fails");
        return 10 * i;
      },
      [&](int, Outcome<int>& outcome) { seen.push_back(outcome.error ? -1 : outcome.value); });
  CHECK(on_caller);
  CHECK(seen == std::vector<int>{0, -1, 20});
}

// Executor::prepare: what is loaded, or found (a disk hit) on the calling thread, is not given
// to the pool.
TEST_CASE("a call's kernels already loaded or found in the cache are not compiled again") {
  std::vector<KernelSpec> specs(3, sample_spec());
  specs[0].readable_name = "loaded";
  specs[1].readable_name = "on disk";
  specs[2].readable_name = "missing";
  std::vector<std::string> looked_for, made_ready;
  prepare_missing(
      specs, [](const KernelSpec& s) { return s.readable_name == "loaded"; },
      [&](const KernelSpec& s) {
        looked_for.push_back(s.readable_name);
        return s.readable_name == "on disk";
      },
      [&](const KernelSpec& s) { made_ready.push_back(s.readable_name); });
  CHECK(looked_for == std::vector<std::string>{"on disk", "missing"});
  CHECK(made_ready == std::vector<std::string>{"missing"});
  std::atomic<int> pooled{0};  // (the pool's threads count)
  CHECK_NOTHROW(prepare_missing(
      specs, [](const KernelSpec&) { return false; },
      [](const KernelSpec&) -> bool { throw std::runtime_error("NVRTC unusable"); },
      [&](const KernelSpec&) { ++pooled; }));
  CHECK(pooled == 3);  // a lookup that throws leaves its spec to make_ready
}

// Executor::prepare's pool: every spec made ready, at once where the machine has the workers,
// and a failure left for the launch (prepare itself does not throw).
TEST_CASE("a call's kernels are made ready concurrently, a failure left for its launch") {
  const flashjit::detail::KernelSpec spec = flashjit::testing::sample_spec();
  std::vector<flashjit::detail::KernelSpec> specs(3, spec);
  specs[1].readable_name = "fails";
  std::mutex mutex;
  std::condition_variable arrived;
  int started = 0;
  int finished = 0;
  bool overlapped = false;
  const int together = std::min(flashjit::detail::default_workers(), 3);
  flashjit::detail::prepare_concurrently(specs, [&](const flashjit::detail::KernelSpec& s) {
    std::unique_lock lock(mutex);
    ++started;
    arrived.notify_all();
    // Overlap: `together` jobs in flight at once (waited for at most 5 s, so one worker
    // cannot hang here).
    overlapped |=
        arrived.wait_for(lock, std::chrono::seconds(5), [&] { return started >= together; });
    ++finished;
    if (s.readable_name == "fails") throw std::runtime_error("reported by the launch");
  });
  CHECK(finished == 3);
  CHECK(overlapped);
  int single = 0;
  flashjit::detail::prepare_concurrently({spec}, [&](const flashjit::detail::KernelSpec&) {
    ++single;
    throw std::runtime_error("reported by the launch");
  });
  CHECK(single == 1);
}

// A pool compiles the long kernels first (shared memory as the measure), so the short ones fill
// in behind them rather than delaying one.
TEST_CASE("kernels are ordered to compile the most shared memory first, ties kept in order") {
  std::vector<flashjit::detail::KernelSpec> specs(5, flashjit::testing::sample_spec());
  const int shared[] = {0, 200 * 1024, 0, 100 * 1024, 200 * 1024};
  for (std::size_t i = 0; i < specs.size(); ++i) {
    specs[i].readable_name = "k" + std::to_string(i);
    specs[i].dynamic_shared_bytes = shared[i];
  }
  flashjit::detail::order_longest_compiles_first(specs);
  std::vector<std::string> names;
  for (const auto& spec : specs) names.push_back(spec.readable_name);
  CHECK(names == std::vector<std::string>{"k1", "k4", "k3", "k0", "k2"});
}
