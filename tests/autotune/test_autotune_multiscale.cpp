// The autotuner's multi-scale attention ops without a GPU: their candidates (attention tiles
// compiled with multi-scale attention's step for the call's mask), keys, FLOPs, tuning end to end
// on the emulator, and Runtime::multiscale_forward and _backward running a database's winners under
// the cached policy.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "api/runtime_parts.hpp"
#include "autotune/candidates.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_state.hpp"
#include "flashjit/flashjit.hpp"
#include "multiscale/multiscale_attention.hpp"
#include "multiscale/multiscale_case.hpp"
#include "multiscale/multiscale_tuning.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using namespace flashjit::autotune;
using flashjit::testing::ScopedEnv;
using flashjit::testing::TempDir;

namespace {

kernels::MultiScaleProblem multiscale_problem(bool backward, MultiScaleMask mask,
                                              std::int64_t seqlen, int head_dim) {
  const MultiScaleAttention a{1, 2, 2, seqlen, seqlen, head_dim, 0.0f, mask};
  return kernels::MultiScaleProblem(backward, DType::bf16, a);
}

std::vector<std::string> kernel_names(Runtime& runtime) {
  std::vector<std::string> names;
  for (const KernelWork& k : runtime.emulated_work()) names.push_back(k.kernel);
  return names;
}

bool ran(const std::vector<std::string>& names, const std::string& prefix) {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return n.starts_with(prefix); });
}

}  // namespace

TEST_CASE(
    "multiscale candidates: attention tiles with multi-scale attention's kernels for the call's "
    "mask") {
  for (MultiScaleMask mask : {MultiScaleMask::decay, MultiScaleMask::tensor}) {
    const char* mask_name = mask == MultiScaleMask::decay ? "decay" : "tensor";
    CAPTURE(mask_name);
    const kernels::MultiScaleProblem forward = multiscale_problem(false, mask, 4096, 64);
    const std::vector<Candidate> candidates = enumerate_candidates(forward, "sm_90a");
    REQUIRE(candidates.size() == kernels::multiscale_forward_configs(DType::bf16, 64).size());
    int defaults = 0;
    for (const Candidate& c : candidates) {
      const auto& config = c.config.get<kernels::MultiScaleForwardConfig>();
      CHECK(config.mask == mask);
      CHECK(config.tile.path() == kernels::ForwardPath::mma_sync);
      CHECK(c.name == TunedConfig(config.tile).name());  // the mask is the key's
      REQUIRE(c.specs.size() == 1);
      CHECK(c.specs[0].readable_name.starts_with(std::string("multiscale_forward.hdim64.bf16.") +
                                                 mask_name));
      defaults += c.is_default ? 1 : 0;
    }
    CHECK(defaults == 1);
    const std::string key = tuning_key(forward).to_string();
    CHECK(key.starts_with("multiscale-forward/"));
    CHECK(key.find(std::string("/") + mask_name + "/q4096/k4096/bh2") != std::string::npos);

    const kernels::MultiScaleProblem backward = multiscale_problem(true, mask, 4096, 64);
    // As the deterministic attention backward: each tile beside the default's other tile (the
    // fastest pair is timed after them), not every pair.
    const std::vector<Candidate> pairs = enumerate_candidates(backward, "sm_90a");
    const auto fallback =
        backward.default_config("sm_90a").get<kernels::MultiScaleBackwardConfig>().tiles;
    CHECK(pairs.size() < kernels::multiscale_backward_configs(DType::bf16, 64).size());
    for (const Candidate& c : pairs) {
      const auto& tiles = c.config.get<kernels::MultiScaleBackwardConfig>().tiles;
      CHECK((tiles.key == fallback.key || tiles.query == fallback.query));
      REQUIRE(c.specs.size() == 3);  // δ, dK/dV, dQ
      CHECK(c.specs[2].readable_name.starts_with("multiscale_backward.dq.hdim64.bf16."));
      CHECK(c.threads == c.config.get<kernels::MultiScaleBackwardConfig>().tiles.key.warps * 32);
    }
    // The decay is causal: half the pairs of the mask tensor's FLOPs.
    CHECK(forward.flops() ==
          (mask == MultiScaleMask::decay ? 0.5 : 1.0) * 4.0 * 2 * 4096.0 * 4096 * 64);
    CHECK(backward.flops() == 2.5 * forward.flops());
  }
  CHECK(tuning_key(multiscale_problem(false, MultiScaleMask::decay, 512, 64)).to_string() !=
        tuning_key(multiscale_problem(false, MultiScaleMask::tensor, 512, 64)).to_string());
  CHECK(TuningState::shape_class(multiscale_problem(false, MultiScaleMask::decay, 512, 64)) !=
        TuningState::shape_class(multiscale_problem(false, MultiScaleMask::tensor, 512, 64)));
}

TEST_CASE("multiscale backward: the fastest pair of tiles is one of its own configs") {
  const kernels::MultiScaleProblem p = multiscale_problem(true, MultiScaleMask::tensor, 4096, 64);
  TuneReport report;
  report.candidates = enumerate_candidates(p, "sm_90a");
  const auto fallback = p.default_config("sm_90a").get<kernels::MultiScaleBackwardConfig>().tiles;
  const Candidate* fast_key = nullptr;
  const Candidate* fast_query = nullptr;
  for (const Candidate& c : report.candidates) {
    const auto& tiles = c.config.get<kernels::MultiScaleBackwardConfig>().tiles;
    double ms = 10.0;
    if (tiles.query == fallback.query && tiles.key != fallback.key && fast_key == nullptr) {
      fast_key = &c;
      ms = 5.0;
    } else if (tiles.key == fallback.key && tiles.query != fallback.query &&
               fast_query == nullptr) {
      fast_query = &c;
      ms = 6.0;
    }
    report.timings.push_back({c.name, ms, "ok"});
  }
  REQUIRE((fast_key != nullptr && fast_query != nullptr));
  const std::optional<TunedConfig> pair = p.fastest_pair(report.candidates, report.timings);
  REQUIRE(pair.has_value());
  const auto& config = pair->get<kernels::MultiScaleBackwardConfig>();
  CHECK(config.mask == MultiScaleMask::tensor);
  CHECK(config.tiles.key == fast_key->config.get<kernels::MultiScaleBackwardConfig>().tiles.key);
  CHECK(config.tiles.query ==
        fast_query->config.get<kernels::MultiScaleBackwardConfig>().tiles.query);
}

TEST_CASE("multiscale tuning on the emulator: checked, stored, then run by the runtime") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  Runtime runtime(RuntimeOptions{.backend = Backend::emulator, .tuning = TuningPolicy::cached});
  TuningState& state = detail::tuning_of(runtime);
  const std::string arch = runtime.device().arch();
  TuneOptions options;
  options.jobs = 1;
  options.timing = {.warmup_runs = 0, .min_runs = 1, .max_runs = 1, .budget_ms = 1};
  const std::string forward_winner = "br64.bc32.w4.s1";
  const std::string backward_winner = "br64.bc64.w4.s1.dq.br64.bc64.w4";
  struct Op {
    bool backward;
    std::string alternative;
  };
  for (const Op& op : {Op{false, forward_winner}, Op{true, backward_winner}}) {
    const kernels::MultiScaleProblem p =
        multiscale_problem(op.backward, MultiScaleMask::tensor, 64, 32);
    const std::string fallback = p.default_config(arch).name();
    REQUIRE(fallback != op.alternative);
    options.only = {op.alternative};
    const TuneReport report = tune(state, p, options);
    REQUIRE(report.timings.size() == 2);  // the default and the one selected
    for (const CandidateTiming& t : report.timings) {
      CHECK_MESSAGE(t.status == "ok", t.config << ": " << t.status);  // equal to the default's
    }
    // A winner the next runtime runs, whatever the emulator's times said.
    TuningEntry entry;
    entry.default_config = fallback;
    entry.candidates = {{fallback, 2.0, "ok"}, {op.alternative, 1.0, "ok"}};
    entry.winner = op.alternative;
    merge_into_file(state.database(), state.meta(), report.key, entry);
  }
  Runtime cached(RuntimeOptions{.backend = Backend::emulator, .tuning = TuningPolicy::cached});
  testing::MultiScaleCase c;
  c.heads_q = c.heads_kv = 2;
  c.seqlen_q = c.seqlen_k = 60;  // the same buckets as the tuned 64
  c.head_dim = 32;
  c.mask = MultiScaleMask::tensor;
  c.backward = c.mask_gradient = true;
  cached.reset_emulated_work();
  const testing::MultiScaleVerdict verdict = testing::run_multiscale_case(cached, c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  const std::vector<std::string> names = kernel_names(cached);
  CHECK(ran(names, "multiscale_forward.hdim32.bf16.tensor.br64.bc32.w4.s1"));
  CHECK(ran(names, "multiscale_backward.dkdv.hdim32.bf16.tensor.br64.bc64.w4.s1"));
  CHECK(ran(names, "multiscale_backward.dq.hdim32.bf16.tensor.br64.bc64.w4"));
  // Policy off runs the defaults instead.
  Runtime off(RuntimeOptions{.backend = Backend::emulator, .tuning = TuningPolicy::off});
  off.reset_emulated_work();
  CHECK(testing::run_multiscale_case(off, c).ok);
  CHECK_FALSE(ran(kernel_names(off), "multiscale_forward.hdim32.bf16.tensor.br64.bc32.w4.s1"));
}
