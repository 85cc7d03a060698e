// The layer_norm op's compile matrix: the default of every (dtype, norm, row-length bucket),
// forward and backward, and the parameter-gradient kernels compile with NVRTC for sm_80 and
// sm_90a without spills; the defaults are configs of the space and cover every row length.
#include <doctest/doctest.h>

#include <algorithm>

#include "common/op_registry.hpp"
#include "layer_norm/layer_norm.hpp"
#include "layer_norm/layer_norm_space.cuh"
#include "runtime/kernel_cache.hpp"
#include "support/compile_checks.hpp"

using namespace flashjit;
using namespace flashjit::detail;

TEST_CASE("the layer_norm defaults compile for sm_80 and sm_90a without spills") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const auto specs = kernels::find_op("layer-norm").specs(arch, kernels::SpecSet::defaults);
    CHECK(specs.size() < kernels::find_op("layer-norm").specs(arch, kernels::SpecSet::all).size());
    testing::check_compiles_without_spills(cache, specs);
  }
}

TEST_CASE("the layer_norm default is a config of the space for every row length") {
  const auto configs = kernels::layer_norm_configs();
  for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
    for (bool rms : {false, true}) {
      for (int cols : {1, 7, 100, 256, 257, 1000, 1024, 4096, 4097, 65536}) {
        const auto config = kernels::default_layer_norm_config(dtype, rms, cols);
        CHECK_MESSAGE(std::find(configs.begin(), configs.end(), config) != configs.end(),
                      "default for " << cols << " columns is not in the space");
        CHECK((config.max_cols == 0 || config.max_cols >= cols));
      }
    }
  }
  const auto at = [](int cols) {
    const auto c = kernels::default_layer_norm_config(DType::bf16, false, cols);
    return std::tuple(c.max_cols, c.threads_per_row, c.vector_width);
  };
  CHECK(at(100) == std::tuple(256, 32, 4));
  CHECK(at(1000) == std::tuple(1024, 128, 4));
  CHECK(at(4096) == std::tuple(4096, 512, 4));
  CHECK(at(65536) == std::tuple(0, 512, 4));
}

TEST_CASE("the backward's slots depend on the shape only and bound the workspace") {
  const auto slots = kernels::layer_norm_slots(1000, 64);
  CHECK(slots.slots == layer_norm_space::kMaxSlots);
  CHECK(slots.rows_per_slot * slots.slots >= 1000);
  const auto wide = kernels::layer_norm_slots(1000, 65536);
  CHECK(3ll * wide.slots * 65536 <= layer_norm_space::kWorkspaceFloats);
  CHECK(kernels::layer_norm_slots(3, 64).slots == 3);
  CHECK(kernels::layer_norm_slots(0, 64).slots == 1);
}
