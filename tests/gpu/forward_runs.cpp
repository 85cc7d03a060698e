#include "gpu/forward_runs.hpp"

#include <string>
#include <vector>

#include "attention/attention_forward.hpp"

namespace flashjit::testing {
namespace {

/// The forward op, as check_sweep sees it.
struct ForwardOp {
  using Case = ForwardCase;
  using Config = kernels::ForwardConfig;
  using Runner = ForwardCaseRunner;
  static std::vector<Config> space(const Case& c, const std::string& arch) {
    std::vector<Config> configs =
        kernels::forward_configs(c.dtype, static_cast<int>(c.problem.head_dim),
                                 kernels::forward_mask_kind(c.attention()), c.problem.softcap > 0);
    std::erase_if(configs, [&](const Config& config) { return !kernels::runs_on(config, arch); });
    return configs;  // the Hopper path too on an H100
  }
  static Config default_config(const Case& c, const std::string& arch) {
    return kernels::default_forward_config(c.dtype, static_cast<int>(c.problem.head_dim),
                                           kernels::forward_mask_kind(c.attention()),
                                           c.problem.softcap > 0, arch);
  }

  static std::string name(const Config& config) {
    const bool hopper = config.path() != kernels::ForwardPath::mma_sync;
    return kernels::forward_spec(config, hopper ? "sm_90a" : "sm_80").readable_name;
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
