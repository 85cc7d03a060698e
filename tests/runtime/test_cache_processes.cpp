// The kernel cache seen by several processes and under hostile file systems.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/kernel_cache.hpp"
#include "support/child_process.hpp"
#include "support/kernel_fixtures.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit::detail;
using flashjit::testing::ChildResult;
using flashjit::testing::cache_options;
using flashjit::testing::sample_spec;
using flashjit::testing::TempDir;

namespace {

constexpr int kKeys = 3;

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<std::filesystem::path> files_under(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  return files;
}

// Compiles every sample key; the exit code is the number of compiles this process did.
int compile_sample_keys(const std::filesystem::path& dir) {
  KernelCache cache(cache_options(dir));
  for (int variant = 0; variant < kKeys; ++variant) cache.get(sample_spec(variant));
  return cache.stats().compiles;
}

}  // namespace

TEST_CASE("eight processes compiling the same keys into one empty cache") {
  TempDir dir;
  std::vector<ChildResult> results =
      flashjit::testing::run_in_children(8, [&](int) { return compile_sample_keys(dir.path()); });
  int compiles = 0;
  for (const ChildResult& result : results) {
    REQUIRE_MESSAGE(result.exit_code >= 0, result.output);
    CHECK_MESSAGE(result.output.empty(), result.output);  // no warnings, no errors
    compiles += result.exit_code;
  }
  CHECK(compiles == kKeys);  // the per-key lock let exactly one process compile each key

  KernelCache reader(cache_options(dir.path()));
  auto entries = reader.disk()->list();
  CHECK(entries.size() == kKeys);
  for (const auto& info : entries) CHECK_MESSAGE(info.entry.has_value(), info.problem);
  for (const auto& path : files_under(dir.path() / "v1" / "kernels")) {
    CHECK_MESSAGE(path.extension() == ".cubin", path);  // no temp file left behind
  }
}

TEST_CASE("a read-only cache directory works from memory with one warning") {
  TempDir dir;
  const auto root = dir.path() / "cache";
  compile_sample_keys(root);  // one entry exists already: it is still read
  KernelCache probe(cache_options(root));
  const auto existing = probe.disk()->list();
  REQUIRE(existing.size() == kKeys);
  std::filesystem::remove(existing.front().path);
  for (const auto& sub : {root, root / "v1", root / "v1" / "kernels", root / "v1" / "locks"}) {
    ::chown(sub.c_str(), 65534, 65534);  // for the unprivileged child when running as root
  }
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    ::chown(entry.path().c_str(), 65534, 65534);
    if (entry.is_directory()) ::chmod(entry.path().c_str(), 0500);
  }
  ::chmod(root.c_str(), 0500);
  ::chmod(dir.path().c_str(), 0755);

  ChildResult result = flashjit::testing::run_in_child(
      [&] {
        KernelCache cache(cache_options(root));
        int compiled = 0;
        for (int round = 0; round < 2; ++round) {
          for (int variant = 0; variant < kKeys; ++variant) {
            compiled += cache.get(sample_spec(variant)).source == CacheSource::compiled;
          }
        }
        std::printf("disk hits %d compiles %d\n", cache.stats().disk_hits.load(), compiled);
        return 0;
      },
      /*as_nobody=*/true);
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK_MESSAGE(count(result.output, "warning") == 1, result.output);
  CHECK(result.output.find("not writable") != std::string::npos);
  CHECK(result.output.find("disk hits 2 compiles 1") != std::string::npos);
  CHECK(files_under(root / "v1" / "kernels").size() == kKeys - 1);
}

TEST_CASE("a full disk falls back to memory with one warning and leaves no partial file") {
  TempDir dir;
  ChildResult result = flashjit::testing::run_in_child([&] {
    // RLIMIT_FSIZE makes every write past 1 KiB fail with EFBIG, as a full disk would.
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{1024, 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    KernelCache cache(cache_options(dir.path()));
    for (int round = 0; round < 2; ++round) {
      for (int variant = 0; variant < kKeys; ++variant) cache.get(sample_spec(variant));
    }
    std::printf("compiles %d memory hits %d\n", cache.stats().compiles.load(),
                cache.stats().memory_hits.load());
    return 0;
  });
  CHECK_MESSAGE(result.exit_code == 0, result.output);
  CHECK_MESSAGE(count(result.output, "warning") == 1, result.output);
  CHECK(result.output.find("compiles 3 memory hits 3") != std::string::npos);
  CHECK(files_under(dir.path() / "v1" / "kernels").empty());
}
