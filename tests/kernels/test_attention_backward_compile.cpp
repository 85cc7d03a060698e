// The attention backward op's compile matrix (DESIGN.md section 8): for sm_80 and sm_90a, every
// spec `flashjit compile --op attention-backward --all` lists compiles with NVRTC, and the
// default configs (what runs without tuning) do not spill, except at the head dims listed
// below, where every config of today's templates spills some bytes. The list is exact: a
// default that starts to spill fails here, and so does one that stops (drop it from the list).
// One test case per arch, so that CTest can run the two side by side.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/attention_backward.hpp"
#include "kernels/op_registry.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"

using namespace flashjit;
using namespace flashjit::detail;
using kernels::MaskKind;

namespace {

// NVRTC takes hundreds of MB per compile, and CI has 2 cores.
constexpr int kWorkers = 2;

// The head dims whose default configs spill (any of their kernels, for both dtypes and both
// masks), per arch and softcap, with NVRTC 13.0. Past head dim 168 the dK or dV accumulator,
// S, dP and the addresses rarely fit 255 registers per thread, even at Br = Bc = 32 over 2
// warps; which head dims tip over on which arch is ptxas's allocation, not a pattern.
struct SpillingHeadDims {
  std::set<int> plain;
  std::set<int> softcap;
};
const std::map<std::string, SpillingHeadDims> kSpillingDefaults = {
    {"sm_80", {{176, 192, 208, 224, 232, 240, 248, 256}, {256}}},
    {"sm_90a", {{176, 192, 200, 208, 216, 224, 232, 240, 248, 256}, {256}}},
};

// The head dims with softcap defaults in the registry (kSoftcapHeadDims in op_registry.cpp).
constexpr int kSoftcapHeadDims[] = {128, 256};

// Compiles every spec and returns each one's spill bytes by readable name; a spec that fails
// to compile fails the test and is left out.
std::map<std::string, int> compile_all(const std::vector<KernelSpec>& specs) {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  std::map<std::string, int> spills;
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
        spills[spec.readable_name] = resources.spill_bytes();
      });
  return spills;
}

/// The spill bytes of a default config's kernels (0 when none spills), from `spills`.
int config_spill_bytes(const kernels::BackwardConfig& config, const std::string& arch,
                       const std::map<std::string, int>& spills) {
  const kernels::BackwardSpecs specs = kernels::backward_specs(config, arch);
  std::vector<KernelSpec> all = specs.key_gradients;
  all.push_back(specs.dq);
  all.push_back(specs.delta);
  int bytes = 0;
  for (const KernelSpec& spec : all) {
    const auto it = spills.find(spec.readable_name);
    if (it == spills.end()) {
      FAIL_CHECK(spec.readable_name << " is not in the compile matrix or did not compile");
      continue;
    }
    if (it->second != 0) MESSAGE(spec.display_name() << " spills " << it->second << " bytes");
    bytes += it->second;
  }
  return bytes;
}

/// Checks that the default of (head_dim, softcap) spills, for every dtype and mask, exactly
/// when `expected` says so.
void check_defaults(const std::string& arch, int head_dim, bool softcap, bool expected,
                    const std::map<std::string, int>& spills) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
      const auto config = kernels::default_backward_config(dtype, head_dim, mask, softcap, arch);
      const bool spilling = config_spill_bytes(config, arch, spills) != 0;
      CHECK_MESSAGE(spilling == expected,
                    "the default for head dim "
                        << head_dim << (softcap ? " with softcap" : "") << " (" << dtype_name(dtype)
                        << ", mask " << (mask == MaskKind::window ? "window" : "none") << ") on "
                        << arch << (spilling ? " now spills" : " no longer spills"));
    }
  }
}

void check_compile_matrix(const std::string& arch) {
  const auto specs = kernels::find_op("attention-backward").specs(arch, kernels::SpecSet::all);
  REQUIRE(!specs.empty());
  const std::map<std::string, int> spills = compile_all(specs);
  int spilling = 0;
  for (const auto& [name, bytes] : spills) spilling += bytes != 0 ? 1 : 0;
  MESSAGE(specs.size() << " specs for " << arch << ", " << spilling << " spilling");
  const SpillingHeadDims& expected = kSpillingDefaults.at(arch);
  for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
    check_defaults(arch, head_dim, false, expected.plain.count(head_dim) == 1, spills);
  }
  for (int head_dim : kSoftcapHeadDims) {
    check_defaults(arch, head_dim, true, expected.softcap.count(head_dim) == 1, spills);
  }
}

}  // namespace

TEST_CASE("attention-backward: every listed spec compiles for sm_80, the defaults as listed") {
  check_compile_matrix("sm_80");
}

TEST_CASE("attention-backward: every listed spec compiles for sm_90a, the defaults as listed") {
  check_compile_matrix("sm_90a");
}
