// The softmax op's compile matrix: every config compiles with NVRTC for sm_80 and sm_90a and
// none spills.
#include <doctest/doctest.h>

#include "common/op_registry.hpp"
#include "runtime/kernel_cache.hpp"
#include "softmax/softmax.hpp"
#include "support/compile_checks.hpp"

using namespace flashjit;
using namespace flashjit::detail;

TEST_CASE("every softmax config compiles for sm_80 and sm_90a without spills") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const auto specs = kernels::find_op("softmax").specs(arch, kernels::SpecSet::all);
    CHECK(specs.size() == kernels::softmax_configs().size());
    testing::check_compiles_without_spills(cache, specs);
  }
}

TEST_CASE("the default config holds the row in the smallest bucket") {
  using kernels::default_softmax_config;
  CHECK(default_softmax_config(DType::bf16, 1).max_cols == 128);
  CHECK(default_softmax_config(DType::bf16, 128).max_cols == 128);
  CHECK(default_softmax_config(DType::bf16, 129).max_cols == 512);
  CHECK(default_softmax_config(DType::bf16, 8192).max_cols == 8192);
  CHECK(default_softmax_config(DType::bf16, 8193).max_cols == 0);
  for (int cols : {1, 100, 500, 2000, 8000, 100000}) {
    const auto config = default_softmax_config(DType::f16, cols);
    CHECK(config.threads_per_row > 0);
    bool listed = false;
    for (const auto& candidate : kernels::softmax_configs()) {
      listed |= candidate.dtype == config.dtype && candidate.max_cols == config.max_cols &&
                candidate.threads_per_row == config.threads_per_row;
    }
    CHECK_MESSAGE(listed, "default for " << cols << " columns is not in the space");
  }
}
