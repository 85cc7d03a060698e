#include "gpu/forward_runs.hpp"

#include <string>

#include "kernels/attention_forward.hpp"

namespace flashjit::testing {
namespace {

/// The forward op, as check_sweep sees it.
struct ForwardOp {
  using Case = ForwardCase;
  using Config = kernels::ForwardConfig;
  using Runner = ForwardCaseRunner;
  static constexpr auto space = kernels::forward_configs;
  static constexpr auto default_config = kernels::default_forward_config;

  static std::string name(const Config& config) {
    return kernels::forward_spec(config, "sm_80").readable_name;
  }
  static std::vector<detail::KernelSpec> specs(const Case&, const Config& config,
                                               const std::string& arch) {
    return {kernels::forward_spec(config, arch)};
  }
};

}  // namespace

void check_cases(const std::vector<ForwardCase>& cases, ConfigSweep sweep) {
  check_sweep<ForwardOp>(cases, sweep);
}

}  // namespace flashjit::testing
