// The layer_norm op's compile matrix: the default of every (dtype, norm, row-length bucket),
// forward and backward (with their cluster-split twins on sm_90a), and the parameter-gradient
// kernels compile with NVRTC for sm_80 and sm_90a without spills (fp16's in bf16's stead in
// CI's sample), the forward's within the registers its grid's blocks per SM leave; the defaults
// are configs of the space and cover every row length; the forward's PTX moves 16-byte vectors
// and divides per row, not per element.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "common/op_registry.hpp"
#include "layer_norm/layer_norm.hpp"
#include "layer_norm/layer_norm_space.cuh"
#include "runtime/compiler.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/template_sources.hpp"
#include "support/compile_checks.hpp"

using namespace flashjit;
using namespace flashjit::detail;

TEST_CASE("the layer_norm defaults compile for sm_80 and sm_90a without spills") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const auto defaults = kernels::find_op("layer-norm").specs(arch, kernels::SpecSet::defaults);
    CHECK(defaults.size() <
          kernels::find_op("layer-norm").specs(arch, kernels::SpecSet::all).size());
    std::set<std::string> names;
    for (const KernelSpec& spec : defaults) names.insert(spec.readable_name);
    // CI's lighter sample leaves each fp16 kernel to its bf16 twin (the same lines but the
    // element conversions); FLASHJIT_COMPILE_MATRIX=full compiles every default.
    const auto specs = testing::compile_sample(defaults, names);
    CHECK(specs.size() * 3 >= defaults.size() * 2);  // bf16 and fp32 kernels are all kept
    testing::check_compiles_without_spills(cache, specs);
    // The forward's persistent grid puts forward_blocks_per_sm blocks on each SM, and its
    // kernels' launch bounds ask ptxas for as many: had ptxas used more registers than those
    // leave (77 at 512 threads once, when the grid assumed four blocks an SM), the grid would
    // run in waves with a fraction of its loads in flight.
    for (const KernelSpec& spec : specs) {
      if (spec.role != "layer_norm") continue;
      CAPTURE(spec.display_name());
      const ResourceUsage& r = cache.get(spec).entry->kernel.resources;
      const int resident = detail::blocks_per_sm(r.registers, spec.threads,
                                                 r.static_shared_bytes + spec.dynamic_shared_bytes,
                                                 arch_shared_memory_limit(arch), arch);
      CHECK(resident >= layer_norm_space::forward_blocks_per_sm(spec.threads));
    }
  }
}

TEST_CASE("the layer_norm default is a config of the space for every row length") {
  const auto configs = kernels::layer_norm_configs();
  for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
    for (bool rms : {false, true}) {
      for (int cols : {1, 7, 100, 256, 257, 513, 1000, 1024, 1536, 2049, 4096, 4097, 65536}) {
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
  // 16-byte vectors (8 bf16) wherever the row length is a multiple of them.
  CHECK(at(100) == std::tuple(256, 32, 1));
  CHECK(at(96) == std::tuple(256, 32, 8));
  CHECK(at(1000) == std::tuple(1024, 128, 8));
  // The smallest power-of-two bucket, 8 values a thread: at least half the threads load.
  CHECK(at(384) == std::tuple(512, 64, 8));
  CHECK(at(1536) == std::tuple(2048, 256, 8));
  CHECK(at(2048) == std::tuple(2048, 256, 8));
  CHECK(at(4096) == std::tuple(4096, 512, 8));
  CHECK(at(4097) == std::tuple(0, 1024, 1));
  CHECK(at(65536) == std::tuple(0, 1024, 8));
}

TEST_CASE("the layer_norm space takes 16-byte vectors and packs narrow rows into blocks") {
  CHECK(layer_norm_space::width_valid(8, 2));
  CHECK(layer_norm_space::width_valid(4, 4));
  CHECK_FALSE(layer_norm_space::width_valid(8, 4));  // 32 bytes: two accesses, not one
  CHECK_FALSE(layer_norm_space::width_valid(4, 2));
  // A row's values a thread stay within the register budget; the unbounded bucket takes whole
  // blocks.
  CHECK(layer_norm_space::config_valid(1024, 128, 8, 2));
  CHECK_FALSE(layer_norm_space::config_valid(1024, 32, 8, 2));
  CHECK_FALSE(layer_norm_space::config_valid(0, 128, 8, 2));
  CHECK(layer_norm_space::rows_per_block(32) * 32 == layer_norm_space::kMinBlockThreads);
  CHECK(layer_norm_space::rows_per_block(1024) == 1);
  CHECK(layer_norm_space::merge_bytes(32) == 0);
  CHECK(layer_norm_space::params_bytes(1024, 1024) == 0);
}

TEST_CASE("the unbounded stashes grow in the order they save global bytes") {
  namespace space = layer_norm_space;
  const int cols = 16384;
  CHECK(space::stash_bytes(cols, 2, 3, space::kStashNone) == 0);
  CHECK(space::stash_bytes(cols, 2, 3, space::kStashRow) == cols * 2);
  CHECK(space::stash_bytes(cols, 2, 3, space::kStashRowAndVectors) == 4 * cols * 2);
  CHECK(space::stash_bytes(7, 2, 1, space::kStashRow) == 16);  // rounded to 16 bytes
  CHECK(space::backward_stash_bytes(cols, 2, 2, space::kStashPartials) == 2 * cols * 4);
  CHECK(space::backward_stash_bytes(cols, 2, 2, space::kStashPartials | space::kStashRows) ==
        2 * cols * 4 + 2 * cols * 2);
  CHECK(space::backward_stash_bytes(cols, 2, 2, 7) == 2 * cols * 4 + 3 * cols * 2);
}

namespace {

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("the layer_norm forward's PTX: 16-byte loads and stores, no division per element") {
  for (DType dtype : {DType::bf16, DType::f32}) {
    for (int cols : {768, 4096, 65536}) {
      const auto config = kernels::default_layer_norm_config(dtype, false, cols);
      for (int cluster : {1, 2}) {
        if (cluster > 1 && !kernels::layer_norm_clusters(config, "sm_90a")) continue;
        const auto spec = kernels::layer_norm_spec(config, "sm_90a", cluster);
        CAPTURE(spec.readable_name);
        const std::string ptx = detail::compile_ptx(spec, detail::TemplateSet::embedded());
        CHECK(count_of(ptx, "ld.global.v4.") + count_of(ptx, "ld.global.nc.v4.") > 0);
        CHECK(count_of(ptx, "st.global.v4.") > 0);
        CHECK(count_of(ptx, "ld.global.u16") + count_of(ptx, "ld.global.b16") == 0);
        // 1/cols and 1/sqrt(var + eps), once per row: the 64 values a thread of the bounded
        // configs holds would show 64 divisions with Welford's update per element.
        CHECK(count_of(ptx, "div.rn.f32") <= 2);
        if (cluster > 1) CHECK(count_of(ptx, "ld.shared::cluster.f32") > 0);
      }
    }
  }
}
