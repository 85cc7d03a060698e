#pragma once
// What the ops' compile-matrix tests check of each listed kernel: it compiles with NVRTC,
// spills nothing, has no ptxas performance advisory and reports its registers. Header-only,
// for doctest suites.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::testing {

/// Compiles `specs` through `cache` on the default workers and checks each as above, naming
/// the kernel in a failure.
inline void check_compiles_without_spills(detail::KernelCache& cache,
                                          const std::vector<detail::KernelSpec>& specs) {
  detail::run_ordered<detail::CacheLookup>(
      static_cast<int>(specs.size()), detail::default_workers(),
      [&](int i) { return cache.get(specs[static_cast<std::size_t>(i)]); },
      [&](int i, detail::Outcome<detail::CacheLookup>& outcome) {
        const std::string name = specs[static_cast<std::size_t>(i)].display_name();
        REQUIRE_MESSAGE(!outcome.error, name);
        CHECK_MESSAGE(outcome.value.entry->kernel.resources.spill_bytes() == 0, name);
        CHECK_MESSAGE(outcome.value.entry->kernel.resources.registers > 0, name);
        for (const std::string& advisory : outcome.value.entry->kernel.resources.advisories) {
          FAIL_CHECK(name << " has a ptxas advisory: " << advisory);
        }
      });
}

}  // namespace flashjit::testing
