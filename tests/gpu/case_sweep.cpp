#include "gpu/case_sweep.hpp"

#include <doctest/doctest.h>

#include <exception>
#include <string>

#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::testing {

Runtime& gpu() {
  static Runtime runtime;
  return runtime;
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
