#pragma once
// What the ops' compile-matrix tests check of each listed kernel: it compiles with NVRTC,
// spills nothing, has no ptxas performance advisory and reports its registers. Header-only,
// for doctest suites.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
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

/// The forms `readable_name` carries that add work to the same tiles (a window mask, softcap,
/// paged keys, a split's partial outputs: a bit each), and its name without them and in bf16:
/// two kernels with the same rest differ only in that work.
inline std::pair<int, std::string> compile_variant(std::string readable_name) {
  int forms = 0, bit = 1;
  for (const std::string token : {".window", ".softcap", ".paged", ".split"}) {
    if (const std::size_t at = readable_name.find(token); at != std::string::npos) {
      readable_name.erase(at, token.size());
      forms |= bit;
    }
    bit <<= 1;
  }
  if (const std::size_t at = readable_name.find(".fp16."); at != std::string::npos) {
    readable_name.replace(at, 6, ".bf16.");
  }
  return {forms, std::move(readable_name)};
}

/// Whether the lighter sample leaves `a` to `b`: the same kernel with at least a's forms and
/// more of them, or the same ones in bf16 where `a` is fp16. A form adds work to the same
/// tiles, so the kernel with it holds what the one without holds in registers as well (the
/// whole matrix checks each).
inline bool covered_by(const std::string& a, const std::string& b) {
  const auto [a_forms, a_rest] = compile_variant(a);
  const auto [b_forms, b_rest] = compile_variant(b);
  if (a == b || a_rest != b_rest || (a_forms & b_forms) != a_forms) return false;
  return b_forms != a_forms || (a.find(".fp16.") != std::string::npos &&
                                b.find(".bf16.") != std::string::npos);
}

/// `specs` less those in_compile_sample leaves out and, in the lighter sample, less those
/// covered_by another one kept (CI's 2 cores: half of the sample); `defaults` names the
/// default configs' kernels (readable names).
inline std::vector<detail::KernelSpec> compile_sample(std::vector<detail::KernelSpec> specs,
                                                      const std::set<std::string>& defaults) {
  std::erase_if(specs, [&](const detail::KernelSpec& spec) {
    return !in_compile_sample(spec.readable_name, defaults.count(spec.readable_name) != 0);
  });
  if (full_compile_matrix()) return specs;
  std::map<std::string, std::vector<std::string>> by_rest;
  for (const detail::KernelSpec& spec : specs) {
    by_rest[compile_variant(spec.readable_name).second].push_back(spec.readable_name);
  }
  std::erase_if(specs, [&](const detail::KernelSpec& spec) {
    const bool is_default = defaults.count(spec.readable_name) != 0;
    const auto& twins = by_rest[compile_variant(spec.readable_name).second];
    return std::any_of(twins.begin(), twins.end(), [&](const std::string& twin) {
      // A default is checked for spills, the others only for compiling: only a default twin
      // stands in for a default.
      return covered_by(spec.readable_name, twin) && (!is_default || defaults.count(twin) != 0);
    });
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
