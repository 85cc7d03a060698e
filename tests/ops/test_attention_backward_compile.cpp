// The attention backward op's compile matrix (docs/design.md): for sm_80 and sm_90a, every
// spec `flashjit compile --op attention-backward --all` lists compiles with NVRTC, and no kernel
// of a default config (what runs without tuning) spills or keeps an array in local memory (a
// stack frame, which ptxas does not count as a spill), at every padded head dim (8 to 256, both
// dtypes, both mask kinds, both modes, with softcap at the registry's softcap head dims; the
// kernels compile_sample keeps: all of them with FLASHJIT_COMPILE_MATRIX=full, a lighter
// sample in CI).
// One test case per arch, so that CTest can run the two side by side.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "attention/attention_backward.hpp"
#include "common/op_registry.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"
#include "support/compile_checks.hpp"
#include "support/modifier_expressions.hpp"

using namespace flashjit;
using namespace flashjit::detail;

namespace {

// NVRTC takes hundreds of MB per compile, and CI has 2 cores.
constexpr int kWorkers = 2;

// The head dims with softcap defaults in the registry (kSoftcapHeadDims in op_registry.cpp).
constexpr int kSoftcapHeadDims[] = {128, 256};

// What a compiled spec shows of itself: its local-memory bytes (spill stores and loads, and its
// stack frame) and ptxas's performance advisories.
struct Compiled {
  int local_bytes = 0;
  std::vector<std::string> advisories;
};

// Compiles every spec and returns what each shows, by readable name; a spec that fails to
// compile fails the test and is left out.
std::map<std::string, Compiled> compile_all(const std::vector<KernelSpec>& specs) {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  std::map<std::string, Compiled> compiled;
  run_ordered<CacheLookup>(
      static_cast<int>(specs.size()), kWorkers,
      [&](int i) { return cache.get(specs[static_cast<std::size_t>(i)]); },
      [&](int i, Outcome<CacheLookup>& outcome) {
        const KernelSpec& spec = specs[static_cast<std::size_t>(i)];
        if (outcome.error) {
          try {
            std::rethrow_exception(outcome.error);
          } catch (const std::exception& error) {
            FAIL_CHECK(spec.display_name() << " does not compile: " << error.what());
          }
          return;
        }
        const ResourceUsage& resources = outcome.value.entry->kernel.resources;
        CHECK_MESSAGE(resources.registers > 0, spec.display_name());
        compiled[spec.readable_name] = {resources.spill_bytes() + resources.stack_bytes,
                                        resources.advisories};
      });
  return compiled;
}

/// The local-memory bytes of a default config's kernels (0 when none spills) plus the count
/// of their ptxas advisories, from `compiled`; each one named in a message. Kernels outside
/// `sampled` (the names compile_sample kept) are left out.
int config_problems(const kernels::BackwardConfig& config, const std::string& arch,
                    const std::set<std::string>& sampled,
                    const std::map<std::string, Compiled>& compiled) {
  int problems = 0;
  for (const KernelSpec& spec : kernels::backward_specs(config, arch).in_order()) {
    if (sampled.count(spec.readable_name) == 0) continue;
    const auto it = compiled.find(spec.readable_name);
    if (it == compiled.end()) {
      FAIL_CHECK(spec.readable_name << " is not in the compile matrix or did not compile");
      continue;
    }
    if (it->second.local_bytes != 0) {
      MESSAGE(spec.display_name() << " spills or uses local memory: " << it->second.local_bytes
                                  << " bytes");
    }
    for (const std::string& advisory : it->second.advisories) {
      MESSAGE(spec.display_name() << " has a ptxas advisory: " << advisory);
    }
    problems += it->second.local_bytes + static_cast<int>(it->second.advisories.size());
  }
  return problems;
}

/// Checks that the default of (head_dim, softcap) spills nowhere and has no ptxas advisory,
/// for every dtype and mask.
void check_defaults(const std::string& arch, int head_dim, bool softcap,
                    const std::set<std::string>& sampled,
                    const std::map<std::string, Compiled>& compiled) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
      for (bool deterministic : {false, true}) {
        const auto config =
            kernels::default_backward_config(dtype, head_dim, mask, softcap, deterministic, arch);
        const std::string what = "the default for head dim " + std::to_string(head_dim) +
                                 (softcap ? " with softcap" : "") + " (" +
                                 std::string(dtype_name(dtype)) + ", mask " +
                                 (mask == MaskKind::window ? "window" : "none") +
                                 (deterministic ? ", deterministic" : "") + ") on " + arch;
        CHECK_MESSAGE(config_problems(config, arch, sampled, compiled) == 0,
                      what << " spills or has a ptxas advisory");
      }
    }
  }
}

void check_compile_matrix(const std::string& arch) {
  const kernels::OpInfo& op = kernels::find_op("attention-backward");
  std::set<std::string> defaults;
  for (const KernelSpec& spec : op.specs(arch, kernels::SpecSet::defaults)) {
    defaults.insert(spec.readable_name);
  }
  const auto specs = testing::compile_sample(op.specs(arch, kernels::SpecSet::all), defaults);
  REQUIRE(!specs.empty());
  std::set<std::string> sampled;
  for (const KernelSpec& spec : specs) sampled.insert(spec.readable_name);
  const std::map<std::string, Compiled> compiled = compile_all(specs);
  int spilling = 0, advised = 0;
  for (const auto& [name, kernel] : compiled) {
    spilling += kernel.local_bytes != 0 ? 1 : 0;
    advised += kernel.advisories.empty() ? 0 : 1;
  }
  MESSAGE(specs.size() << " specs for " << arch << ", " << spilling << " spilling, " << advised
                       << " with ptxas advisories");
  for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
    check_defaults(arch, head_dim, false, sampled, compiled);
  }
  for (int head_dim : kSoftcapHeadDims) check_defaults(arch, head_dim, true, sampled, compiled);
}

}  // namespace

TEST_CASE(
    "attention-backward: every listed spec compiles for sm_80, no default spills or has "
    "a ptxas advisory") {
  check_compile_matrix("sm_80");
}

TEST_CASE(
    "attention-backward: every listed spec compiles for sm_90a, no default spills or has "
    "a ptxas advisory") {
  check_compile_matrix("sm_90a");
}

TEST_CASE(
    "attention-backward: the configs with score and mask modifiers compile in registers for "
    "sm_80 and sm_90a (the TMA backward's), in both dQ modes, and with a capture's gradient") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  // A nonlinear score modifier, so the dual numbers carry a slope that is not a constant.
  const kernels::ScoreModifiers modifiers{
      "4.0f * tanhf(score / 4.0f) - 0.125f * (h + 1) * (q_idx - kv_idx)",
      "q_idx / 64 == kv_idx / 64 || kv_idx < 4"};
  std::vector<KernelSpec> specs;
  // The widest tiles, where registers run out first; on sm_90a each of the TMA backward's
  // shapes (two warpgroups of 64 keys each to a padded 64, sharing 64 keys from 128).
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (int head_dim : {64, 128, 256}) {
      if (head_dim == 64 && std::string(arch) == "sm_80") continue;
      for (bool deterministic : {false, true}) {
        const kernels::BackwardConfig config = kernels::modifiers_backward_config(
            DType::bf16, head_dim, MaskKind::window, false, deterministic, arch);
        CHECK(config.tma == (std::string(arch) == "sm_90a"));
        const kernels::BackwardSpecs backward = kernels::backward_specs(config, arch, modifiers);
        specs.push_back(backward.dkdv);
        if (config.has_query_kernel()) specs.push_back(backward.dq);
      }
    }
  }
  // A learnable bias: the score score_mod was given kept per score too, for its gradient.
  const kernels::ScoreModifiers learnable{
      "score + bias[h]", "", {kernels::CaptureType{"bias", DType::f32, 1, true}}};
  for (int head_dim : {64, 128}) {
    const kernels::BackwardConfig config = kernels::modifiers_backward_config(
        DType::bf16, head_dim, MaskKind::window, false, false, "sm_90a");
    specs.push_back(kernels::backward_specs(config, "sm_90a", learnable).dkdv);
  }
  testing::check_compiles_without_spills(cache, specs);
}

TEST_CASE("attention-backward: every function of the modifier grammar compiles on dual numbers") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  const kernels::ScoreModifiers every{testing::every_function_score_mod(),
                                      testing::every_function_mask_mod()};
  // One arch: the math functions are NVRTC's built-ins on every one (the sm_90a kernels compile
  // the same modifiers in the test above).
  const kernels::BackwardConfig config =
      kernels::modifiers_backward_config(DType::bf16, 64, MaskKind::none, false, false, "sm_80");
  CHECK_NOTHROW(cache.get(kernels::backward_specs(config, "sm_80", every).dkdv));
}
