// Multi-scale attention's compile matrix: the forward and backward defaults of both masks
// compile with NVRTC for sm_80 and sm_90a without spills, and its specs name the multi-scale
// entry points with the mask kind.
#include <doctest/doctest.h>

#include "common/op_registry.hpp"
#include "flashjit/error.hpp"
#include "multiscale/multiscale_attention.hpp"
#include "runtime/kernel_cache.hpp"
#include "support/compile_checks.hpp"

using namespace flashjit;
using namespace flashjit::detail;

TEST_CASE("the multiscale defaults compile for sm_80 and sm_90a without spills") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const auto specs = kernels::find_op("multiscale").specs(arch, kernels::SpecSet::defaults);
    CHECK(specs.size() >= 16);  // 4 (dtype, head dim) rows x 2 masks x forward, dK/dV, dQ
    testing::check_compiles_without_spills(cache, specs);
  }
}

TEST_CASE("multi-scale specs name their entry point, traits and mask kind") {
  const kernels::ForwardConfig forward =
      kernels::default_multiscale_forward_config(DType::bf16, 64, "sm_90a");
  CHECK(forward.path() ==
        kernels::ForwardPath::mma_sync);  // no Hopper path for multi-scale attention yet
  const KernelSpec spec =
      kernels::multiscale_forward_spec(forward, MultiScaleMask::tensor, "sm_90a");
  CHECK(spec.op == "multiscale");
  CHECK(spec.name_expression.starts_with(
      "flashjit::multiscale_forward_kernel<flashjit::ForwardTraits<"));
  CHECK(spec.name_expression.ends_with(">, flashjit::MultiScaleMaskKind::tensor>"));
  CHECK(spec.readable_name.starts_with("multiscale_forward.hdim64.bf16.tensor."));
  const auto backward = kernels::multiscale_backward_specs(
      kernels::default_multiscale_backward_config(DType::f16, 128, "sm_80"), MultiScaleMask::decay,
      "sm_80");
  REQUIRE(backward.size() == 3);
  CHECK(backward[0].readable_name == "attention_backward.delta.fp16");
  CHECK(backward[1].name_expression.find("multiscale_backward_dkdv_kernel") != std::string::npos);
  CHECK(backward[2].name_expression.ends_with("flashjit::MultiScaleMaskKind::decay>"));
  kernels::ForwardConfig windowed = forward;
  windowed.mask = MaskKind::window;
  CHECK_THROWS_AS(kernels::multiscale_forward_spec(windowed, MultiScaleMask::decay, "sm_80"),
                  InvalidArgument);
}
