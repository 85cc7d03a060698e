#pragma once
// What the ops' compile-matrix tests check of each listed kernel: it compiles with NVRTC,
// spills nothing, has no ptxas performance advisory and reports its registers. Header-only,
// for doctest suites.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::testing {

/// Whether the attention compile-matrix tests compile `readable_name`: every kernel without a
/// dtype or head dim in its name; bf16 mma.sync kernels at head dims that are multiples of 16,
/// bf16 Hopper kernels (TMA, wgmma) at multiples of 64, and fp16 ones only at head dims 64, 128
/// and 256. Every tile shape is among them: the mma.sync kernels pad head dims to 16 and the
/// Hopper kernels to 64, so a head dim between runs the tiles of the next such multiple and
/// differs from its kernel only in the bound of the last columns; and the two dtypes' kernels
/// share every line but the element conversions. The others add minutes of NVRTC on CI's two
/// cores (`flashjit compile --all` still lists and builds them all).
inline bool in_compile_sample(const std::string& readable_name) {
  const std::size_t at = readable_name.find(".hdim");
  if (at == std::string::npos) return true;
  const int head_dim = std::atoi(readable_name.c_str() + at + 5);
  if (readable_name.find(".fp16") != std::string::npos) {
    return head_dim == 64 || head_dim == 128 || head_dim == 256;
  }
  const bool hopper = readable_name.find(".tma") != std::string::npos ||
                      readable_name.find(".wgmma") != std::string::npos;
  return head_dim % (hopper ? 64 : 16) == 0;
}

/// `specs` less those in_compile_sample leaves out.
inline std::vector<detail::KernelSpec> compile_sample(std::vector<detail::KernelSpec> specs) {
  std::erase_if(
      specs, [](const detail::KernelSpec& spec) { return !in_compile_sample(spec.readable_name); });
  return specs;
}

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
