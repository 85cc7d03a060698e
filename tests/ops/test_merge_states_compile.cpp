// The merge_states op's compile matrix: every config of both forms compiles with NVRTC for
// sm_80 and sm_90a and none spills (fp16's in bf16's stead in CI's sample); the defaults are
// configs of the space.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "common/op_registry.hpp"
#include "merge_states/merge_states.hpp"
#include "runtime/kernel_cache.hpp"
#include "support/compile_checks.hpp"

using namespace flashjit;
using namespace flashjit::detail;

TEST_CASE("every merge_states config compiles for sm_80 and sm_90a without spills") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const kernels::OpInfo& op = kernels::find_op("merge-states");
    const auto all = op.specs(arch, kernels::SpecSet::all);
    CHECK(all.size() == kernels::merge_states_configs().size());
    std::set<std::string> defaults;
    for (const KernelSpec& spec : op.specs(arch, kernels::SpecSet::defaults)) {
      defaults.insert(spec.readable_name);
    }
    // CI's lighter sample leaves an fp16 kernel to its bf16 twin (the same lines but the
    // element conversions); FLASHJIT_COMPILE_MATRIX=full compiles every config.
    const auto specs = testing::compile_sample(all, defaults);
    CHECK((specs.size() < all.size()) != testing::full_compile_matrix());
    testing::check_compiles_without_spills(cache, specs);
  }
}

TEST_CASE("the merge_states default covers the row with about four columns a thread") {
  using kernels::default_merge_states_config;
  const auto at = [](int head_dim) {
    const auto c = default_merge_states_config(DType::f32, DType::bf16, head_dim, false);
    return std::pair(c.threads_per_row, c.columns_per_thread);
  };
  CHECK(at(1) == std::pair(8, 1));
  CHECK(at(32) == std::pair(8, 4));
  CHECK(at(64) == std::pair(16, 4));
  CHECK(at(128) == std::pair(32, 4));
  CHECK(at(256) == std::pair(32, 4));
  const auto configs = kernels::merge_states_configs();
  for (bool in_place : {false, true}) {
    for (int head_dim : {1, 8, 40, 64, 100, 128, 256, 1024}) {
      const auto config = default_merge_states_config(DType::f16, DType::f16, head_dim, in_place);
      CHECK_MESSAGE(std::find(configs.begin(), configs.end(), config) != configs.end(),
                    "default for head dim " << head_dim << " is not in the space");
    }
  }
  // The defaults of the compile matrix are a few configs, each once.
  const auto defaults = kernels::find_op("merge-states").specs("sm_80", kernels::SpecSet::defaults);
  CHECK(defaults.size() < configs.size());
  CHECK(!defaults.empty());
}
