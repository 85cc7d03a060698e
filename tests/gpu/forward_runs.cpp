#include "gpu/forward_runs.hpp"

#include <doctest/doctest.h>

#include <exception>
#include <optional>
#include <set>
#include <string>

#include "kernels/attention_forward.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"

namespace flashjit::testing {
namespace {

using Config = std::optional<kernels::ForwardConfig>;  // nullopt: the runtime's choice

/// The configs to run `c` with: the runtime's choice, and with every_config for bf16 head dims
/// 64 and 128 each config of the space that fits the device's shared memory.
std::vector<Config> configs_for(const ForwardCase& c, ConfigSweep sweep) {
  std::vector<Config> configs = {std::nullopt};
  const auto d = static_cast<int>(c.problem.head_dim);
  if (sweep == ConfigSweep::default_only || c.dtype != DType::bf16 || (d != 64 && d != 128)) {
    return configs;
  }
  const auto shared_limit = static_cast<int>(gpu().device().shared_memory_optin);
  const kernels::MaskKind mask = kernels::forward_mask_kind(c.attention());
  for (const kernels::ForwardConfig& config :
       kernels::forward_configs(c.dtype, d, mask, c.problem.softcap > 0)) {
    if (config.shared_bytes() <= shared_limit) configs.push_back(config);
  }
  return configs;
}

/// The config a run launches: its own, or the heuristic default the runtime picks without a
/// tuning database (a tuned choice would just find its kernel not compiled ahead).
kernels::ForwardConfig resolved(const ForwardCase& c, const Config& config) {
  if (config) return *config;
  return kernels::default_forward_config(c.dtype, static_cast<int>(c.problem.head_dim),
                                         kernels::forward_mask_kind(c.attention()),
                                         c.problem.softcap > 0, gpu().device().arch());
}

std::string label(const ForwardCase& c, const Config& config) {
  const std::string name = kernels::forward_spec(resolved(c, config), "sm_80").readable_name;
  return config ? name : "default (" + name + ")";
}

/// Compiles every distinct kernel the runs need into the process kernel cache on a bounded pool
/// (NVRTC takes hundreds of MB per compile); the runs then find them in memory.
void compile_ahead(const std::vector<ForwardCase>& cases, ConfigSweep sweep) {
  const std::string arch = gpu().device().arch();
  std::set<std::string> seen;
  std::vector<detail::KernelSpec> specs;
  for (const ForwardCase& c : cases) {
    for (const Config& config : configs_for(c, sweep)) {
      detail::KernelSpec spec = kernels::forward_spec(resolved(c, config), arch);
      if (seen.insert(spec.name_expression).second) specs.push_back(std::move(spec));
    }
  }
  detail::run_ordered<detail::CacheLookup>(
      static_cast<int>(specs.size()), detail::default_workers(8),
      [&](int i) {
        return detail::KernelCache::process_cache().get(specs[static_cast<std::size_t>(i)]);
      },
      [&](int i, detail::Outcome<detail::CacheLookup>& outcome) {
        if (!outcome.error) return;
        try {
          std::rethrow_exception(outcome.error);
        } catch (const std::exception& error) {
          FAIL_CHECK(specs[static_cast<std::size_t>(i)].display_name()
                     << " does not compile: " << std::string(error.what()));
        }
      });
}

}  // namespace

Runtime& gpu() {
  static Runtime runtime;
  return runtime;
}

ForwardCase make_case(std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seqlen_q,
                      std::int64_t seqlen_k, std::int64_t head_dim, bool causal) {
  ForwardCase c;
  c.problem.heads_q = heads_q;
  c.problem.heads_kv = heads_kv;
  c.problem.seqlen_q = seqlen_q;
  c.problem.seqlen_k = seqlen_k;
  c.problem.head_dim = head_dim;
  c.problem.causal = causal;
  c.seed = static_cast<std::uint64_t>(seqlen_q * 7919 + seqlen_k * 31 + head_dim);
  return c;
}

void check_cases(const std::vector<ForwardCase>& cases, ConfigSweep sweep) {
  compile_ahead(cases, sweep);
  for (const ForwardCase& c : cases) {
    INFO(c.name());
    const ForwardCaseRunner runner(c);  // inputs and reference, shared by the configs
    for (const Config& config : configs_for(c, sweep)) {
      INFO(label(c, config));
      try {
        const ForwardVerdict verdict = runner.run(gpu(), config);
        CHECK_MESSAGE(verdict.ok, verdict.describe());
      } catch (const std::exception& error) {
        FAIL_CHECK(std::string(error.what()));
      }
    }
  }
}

}  // namespace flashjit::testing
