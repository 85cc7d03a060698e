#pragma once
// What the ops' compile-matrix tests check of each listed kernel: it compiles with NVRTC,
// spills nothing, has no ptxas performance advisory and reports its registers. Header-only,
// for doctest suites.
#include <doctest/doctest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::testing {

/// The number after `field` in `readable_name` (".hdim", ".bc"), or `absent` without one.
inline int name_number(const std::string& readable_name, const std::string& field, int absent) {
  const std::size_t at = readable_name.find(field);
  if (at == std::string::npos) return absent;
  return std::atoi(readable_name.c_str() + at + field.size());
}

/// Whether this run compiles the attention compile matrices whole: FLASHJIT_COMPILE_MATRIX=full
/// (`FLASHJIT_COMPILE_MATRIX=full ctest -L compile`). Otherwise, as in CI, a lighter sample:
/// compiling the whole one on two cores took ~10 of CI's 30 minutes.
inline bool full_compile_matrix() {
  const char* value = std::getenv("FLASHJIT_COMPILE_MATRIX");
  return value != nullptr && std::string(value) == "full";
}

/// Whether the attention compile-matrix tests compile `readable_name`, a default config's kernel
/// (what runs without tuning) or not. Every kernel without a head dim in its name. The whole
/// sample: bf16 mma.sync kernels at head dims that are multiples of 16, bf16 Hopper kernels
/// (TMA, wgmma) at multiples of 64, and fp16 ones only at head dims 64, 128 and 256. Every tile
/// shape is among them: the mma.sync kernels pad head dims to 16 and the Hopper kernels to 64,
/// so a head dim between runs the tiles of the next such multiple and differs from its kernel
/// only in the bound of the last columns; and the two dtypes' kernels share every line but the
/// element conversions. The lighter sample keeps of it the defaults at multiples of 32 (fp16's
/// at 128) and the other configs at head dim 128 with a power-of-two key tile (Bc 80, 96, 112
/// and 176 differ from those in the ring's constants only). `flashjit compile --all` still lists
/// and builds them all.
inline bool in_compile_sample(const std::string& readable_name, bool is_default) {
  const int head_dim = name_number(readable_name, ".hdim", 0);
  if (head_dim == 0) return true;
  const bool fp16 = readable_name.find(".fp16") != std::string::npos;
  const bool hopper = readable_name.find(".tma") != std::string::npos ||
                      readable_name.find(".wgmma") != std::string::npos;
  const bool in_whole = fp16 ? head_dim == 64 || head_dim == 128 || head_dim == 256
                             : head_dim % (hopper ? 64 : 16) == 0;
  if (!in_whole || full_compile_matrix()) return in_whole;
  if (is_default) return fp16 ? head_dim == 128 : head_dim % 32 == 0;
  const int key_tile = name_number(readable_name, ".bc", 64);
  return head_dim == 128 && (key_tile & (key_tile - 1)) == 0;
}

/// `specs` less those in_compile_sample leaves out; `defaults` names the default configs'
/// kernels (readable names).
inline std::vector<detail::KernelSpec> compile_sample(std::vector<detail::KernelSpec> specs,
                                                      const std::set<std::string>& defaults) {
  std::erase_if(specs, [&](const detail::KernelSpec& spec) {
    return !in_compile_sample(spec.readable_name, defaults.count(spec.readable_name) != 0);
  });
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
