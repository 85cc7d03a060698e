#include "gpu/case_sweep.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::testing {

Runtime& gpu() {
  // FLASHJIT_TEST_EMULATED_ARCH (sm_80 or sm_90a) runs the cases on the CPU emulator instead,
  // which names a hang or a race the GPU only shows as a timeout (small cases only: it is slow).
  static Runtime runtime = [] {
    const char* arch = std::getenv("FLASHJIT_TEST_EMULATED_ARCH");
    if (arch == nullptr || *arch == '\0') return Runtime();
    return Runtime(RuntimeOptions{.backend = Backend::emulator, .emulated_arch = arch});
  }();
  return runtime;
}

void SweepProgress::line(const std::string& text) const {
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
  std::fprintf(stderr, "[%7.1f s] %s\n", elapsed.count(), text.c_str());
  std::fflush(stderr);
}

void compile_ahead(const std::vector<detail::KernelSpec>& specs) {
  detail::run_ordered<detail::CacheLookup>(
      static_cast<int>(specs.size()), detail::default_workers(8),
      [&](int i) {
        return detail::KernelCache::process_cache().get(specs[static_cast<std::size_t>(i)]);
      },
      [&](int i, detail::Outcome<detail::CacheLookup>& outcome) {
        if (!outcome.error) return;
        try {
          std::rethrow_exception(outcome.error);
        } catch (const std::exception& error) {
          FAIL_CHECK(specs[static_cast<std::size_t>(i)].display_name()
                     << " does not compile: " << std::string(error.what()));
        }
      });
}

}  // namespace flashjit::testing
