#include "run_multiscale.hpp"

#include <chrono>
#include <cstdio>

#include "format.hpp"
#include "multiscale/multiscale_attention.hpp"

namespace flashjit::tools {

int run_multiscale_op(Runtime& runtime, testing::MultiScaleCase c) {
  c.backward = true;
  c.mask_gradient = c.mask == MultiScaleMask::tensor;
  std::printf("shape:   %s (%s mask, O = S V / max(rowsum|S|, 1))\n", c.name().c_str(),
              c.mask == MultiScaleMask::decay ? "decay" : "tensor");
  const std::string arch = runtime.device().arch();
  const int head_dim = static_cast<int>(c.head_dim);
  std::string kernels =
      kernels::multiscale_forward_spec(
          kernels::default_multiscale_forward_config(c.dtype, head_dim, arch), c.mask, arch)
          .display_name();
  for (const detail::KernelSpec& spec : kernels::multiscale_backward_specs(
           kernels::default_multiscale_backward_config(c.dtype, head_dim, arch), c.mask, arch)) {
    kernels += ", " + spec.display_name();
  }
  std::printf("kernels: %s\n", kernels.c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const testing::MultiScaleVerdict verdict = testing::run_multiscale_case(runtime, c);
  const double elapsed =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (const auto& [name, check] : verdict.checks) {
    std::printf("%-4s max abs error %.3g, relative L2 error %.3g\n", (name + ":").c_str(),
                check.max_abs, check.rel_l2);
  }
  if (!verdict.ok) {
    std::printf("FAIL: the result does not match the float64 reference\n%s\n",
                verdict.describe().c_str());
    return 1;
  }
  std::printf(
      "PASS: each error within twice that of the plain computation in %s (forward, backward "
      "and check in %s)\n",
      std::string(dtype_name(c.dtype)).c_str(), format_duration_ms(elapsed).c_str());
  return 0;
}

}  // namespace flashjit::tools
