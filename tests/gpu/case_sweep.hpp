#pragma once
// Runs attention test cases (attention/attention_case, backward_case) on the GPU over a
// sweep of configs and checks their verdicts, for any op described by an `Op` (see check_sweep):
// the runtime's own config, and for bf16 head dims 64 and 128 every config of the op's space
// that fits the device's shared memory. Every kernel the runs need is compiled ahead, in
// parallel, so that NVRTC's minutes are spent once and on all cores.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_forward.hpp"
#include "flashjit/runtime.hpp"
#include "runtime/kernel_spec.hpp"
#include "support/case_builders.hpp"

namespace flashjit::testing {

/// The GPU, opened once for the whole binary. Without one, every test fails with the Error
/// saying what is missing (no driver, no device).
Runtime& gpu();

/// Which configs a case runs with.
enum class ConfigSweep {
  default_only,  ///< the runtime's choice
  every_config,  ///< also every config that fits the device, for bf16 head dims 64 and 128
};

/// Compiles every kernel of `specs` into the process kernel cache on a bounded pool (NVRTC takes
/// hundreds of MB per compile); the runs then find them in memory. A kernel that does not
/// compile fails the test with its name.
void compile_ahead(const std::vector<detail::KernelSpec>& specs);

/// The configs to run `c` with: the runtime's choice (nullopt), and with every_config for bf16
/// head dims 64 and 128 each config of the op's space that fits the device's shared memory.
template <class Op>
std::vector<std::optional<typename Op::Config>> sweep_configs(const typename Op::Case& c,
                                                              ConfigSweep sweep) {
  std::vector<std::optional<typename Op::Config>> configs = {std::nullopt};
  const auto d = static_cast<int>(c.problem.head_dim);
  if (sweep == ConfigSweep::default_only || c.dtype != DType::bf16 || (d != 64 && d != 128)) {
    return configs;
  }
  const auto shared_limit = static_cast<int>(gpu().device().shared_memory_optin);
  for (const typename Op::Config& config : Op::space(c, gpu().device().arch())) {
    if (config.shared_bytes() <= shared_limit) configs.push_back(config);
  }
  return configs;
}

/// The config a run launches: its own, or the heuristic default the runtime picks without a
/// tuning database (a tuned choice would just find its kernel not compiled ahead).
template <class Op>
typename Op::Config resolved_config(const typename Op::Case& c,
                                    const std::optional<typename Op::Config>& config) {
  if (config) return *config;
  return Op::default_config(c, gpu().device().arch());
}

/// "<readable name of the config>", or "default (<that of the runtime's choice>)".
template <class Op>
std::string sweep_label(const typename Op::Case& c,
                        const std::optional<typename Op::Config>& config) {
  const std::string name = Op::name(resolved_config<Op>(c, config));
  return config ? name : "default (" + name + ")";
}

/// Progress lines on stderr, each with the seconds since the sweep began: where a test that
/// ctest stops at its time limit was (ctest prints a timed-out test's output).
class SweepProgress {
 public:
  void line(const std::string& text) const;

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Runs every case with the configs `sweep` asks for and checks each verdict; a run that throws
/// fails with its label and message, and the others still run. `Op` describes the op:
/// - `Case`, `Config`, `Runner`: its test case, config and case runner (ForwardCase,
///   kernels::ForwardConfig, ForwardCaseRunner, say);
/// - `space(c, arch)` and `default_config(c, arch)`: the configs a sweep of case `c` runs, and
///   the heuristic default for it (kernels::forward_configs, default_forward_config);
/// - `name(config)`: a readable name of the config for messages;
/// - `specs(c, config, arch)`: every kernel a run of `c` with `config` launches.
template <class Op>
void check_sweep(const std::vector<typename Op::Case>& cases, ConfigSweep sweep) {
  const std::string arch = gpu().device().arch();
  std::set<std::string> seen;
  std::vector<detail::KernelSpec> specs;
  for (const typename Op::Case& c : cases) {
    for (const auto& config : sweep_configs<Op>(c, sweep)) {
      for (detail::KernelSpec& spec : Op::specs(c, resolved_config<Op>(c, config), arch)) {
        if (seen.insert(spec.name_expression).second) specs.push_back(std::move(spec));
      }
    }
  }
  SweepProgress progress;
  compile_ahead(specs);
  progress.line("compiled " + std::to_string(specs.size()) + " kernels");
  for (const typename Op::Case& c : cases) {
    INFO(c.name());
    const typename Op::Runner runner(c);  // inputs and reference, shared by the configs
    for (const auto& config : sweep_configs<Op>(c, sweep)) {
      const std::string label = sweep_label<Op>(c, config);
      INFO(label);
      progress.line(c.name() + ", " + label + ": running");
      try {
        const auto verdict = runner.run(gpu(), config);
        CHECK_MESSAGE(verdict.ok, verdict.describe());
      } catch (const std::exception& error) {
        FAIL_CHECK(std::string(error.what()));
      }
    }
  }
  progress.line("done");
}

/// The head dims both GPU suites cover, from 8 to 256, each as an unmasked two-head case, a
/// causal [B, H, L, D] case and an fp16 case (causal at multiples of 16); `make_case` is the
/// suite's builder (forward_case_builders.hpp, backward_case_builders.hpp).
template <class Case>
std::vector<Case> head_dim_cases(Case (*make_case)(std::int64_t, std::int64_t, std::int64_t,
                                                   std::int64_t, std::int64_t, bool)) {
  std::vector<Case> cases;
  for (std::int64_t d : {8, 16, 24, 32, 40, 48, 64, 72, 80, 96, 112, 128, 160, 192, 224, 256}) {
    cases.push_back(make_case(2, 2, 129, 200, d, false));
    cases.push_back(with_layout(make_case(1, 1, 200, 129, d, true), reference::Layout::bhsd));
    cases.push_back(with_dtype(make_case(1, 1, 100, 100, d, d % 16 == 0), DType::f16));
  }
  return cases;
}

}  // namespace flashjit::testing
