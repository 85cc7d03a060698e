// The attention backward op's compile matrix (DESIGN.md section 8): for sm_80 and sm_90a, every
// spec `flashjit compile --op attention-backward --all` lists compiles with NVRTC, and the
// defaults (what runs without tuning) do not spill, except the kernels listed below, where no
// config of today's templates avoids spilling. The list is exact, so a default that starts to
// spill fails here, and so does one that stops (drop it from the list). One test case per arch,
// so that CTest can run the two side by side.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/op_registry.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"

using namespace flashjit;
using namespace flashjit::detail;

namespace {

// NVRTC takes hundreds of MB per compile, and CI has 2 cores.
constexpr int kWorkers = 2;

// Default kernels that spill (readable names), per arch: PLACEHOLDER
const std::map<std::string, std::set<std::string>> kSpillingDefaults = {
    {"sm_80", {}},
    {"sm_90a", {}},
};

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

void check_compile_matrix(const std::string& arch) {
  const kernels::OpInfo& op = kernels::find_op("attention-backward");
  const auto specs = op.specs(arch, kernels::SpecSet::all);
  REQUIRE(!specs.empty());
  const std::map<std::string, int> spills = compile_all(specs);
  int spilling = 0;
  for (const auto& [name, bytes] : spills) {
    if (bytes != 0) ++spilling;
  }
  std::set<std::string> spilling_defaults;
  const auto defaults = op.specs(arch, kernels::SpecSet::defaults);
  for (const KernelSpec& spec : defaults) {
    const auto it = spills.find(spec.readable_name);
    if (it == spills.end() || it->second == 0) continue;
    spilling_defaults.insert(spec.readable_name);
    MESSAGE("default kernel " << spec.display_name() << " spills " << it->second << " bytes");
  }
  const std::set<std::string>& expected = kSpillingDefaults.at(arch);
  for (const std::string& name : spilling_defaults) {
    CHECK_MESSAGE(expected.count(name) == 1, "default kernel " << name << " now spills");
  }
  for (const std::string& name : expected) {
    CHECK_MESSAGE(spilling_defaults.count(name) == 1,
                  "default kernel " << name << " no longer spills: drop it from the list");
  }
  MESSAGE(specs.size() << " specs for " << arch << ", " << defaults.size() << " default kernels, "
                       << spilling << " spilling, " << spilling_defaults.size()
                       << " of them defaults");
}

}  // namespace

TEST_CASE("attention-backward: every listed spec compiles for sm_80, the defaults as listed") {
  check_compile_matrix("sm_80");
}

TEST_CASE("attention-backward: every listed spec compiles for sm_90a, the defaults as listed") {
  check_compile_matrix("sm_90a");
}
