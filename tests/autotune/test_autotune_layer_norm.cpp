// The autotuner's layer norm ops without a GPU: their candidates (the dtype's and norm's
// configs, every bucket), keys (columns, rows, norm and fused adds), static pruning by row
// length, tuning end to end on the emulator, and Runtime::layer_norm and its backward running
// a database winner under the cached policy.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "api/runtime_parts.hpp"
#include "autotune/candidates.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_state.hpp"
#include "flashjit/flashjit.hpp"
#include "layer_norm/layer_norm_case.hpp"
#include "layer_norm/layer_norm_tuning.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using namespace flashjit::autotune;
using flashjit::testing::ScopedEnv;
using flashjit::testing::TempDir;

namespace {

kernels::LayerNormProblem norm_problem(std::int64_t rows, int cols, bool backward = false) {
  return kernels::LayerNormProblem(backward, DType::bf16, {rows, cols, false, false, false});
}

const Candidate& default_of(const std::vector<Candidate>& candidates) {
  return *std::find_if(candidates.begin(), candidates.end(),
                       [](const Candidate& c) { return c.is_default; });
}

// A database entry for `problem` whose winner is `winner`, beside the default.
void store_winner(TuningState& state, const TuningProblem& problem, const std::string& winner) {
  const std::string fallback = problem.default_config("sm_80").name();
  REQUIRE(fallback != winner);
  TuningEntry entry;
  entry.default_config = fallback;
  entry.candidates = {{fallback, 2.0, "ok"}, {winner, 1.0, "ok"}};
  entry.winner = pick_winner(entry.default_config, entry.candidates);
  REQUIRE(entry.winner == winner);
  merge_into_file(state.database(), state.meta(), tuning_key(problem), entry);
}

// Whether a kernel whose readable name starts with `stem` ran on `runtime` since its reset.
bool ran(Runtime& runtime, const std::string& stem) {
  const std::vector<KernelWork> work = runtime.emulated_work();
  return std::any_of(work.begin(), work.end(),
                     [&](const KernelWork& k) { return k.kernel.starts_with(stem); });
}

}  // namespace

TEST_CASE("layer norm candidates: the dtype's and norm's space, one default, bytes") {
  for (bool backward : {false, true}) {
    CAPTURE(backward);
    const kernels::LayerNormProblem p = norm_problem(100, 1000, backward);
    const std::vector<Candidate> candidates = enumerate_candidates(p, "sm_90a");
    const auto configs = kernels::layer_norm_configs();
    CHECK(candidates.size() ==
          static_cast<std::size_t>(std::count_if(configs.begin(), configs.end(), [](const auto& c) {
            return c.dtype == DType::bf16 && !c.rms;
          })));
    std::set<std::string> names;
    for (const Candidate& c : candidates) {
      names.insert(c.name);
      CHECK(c.specs.size() == (backward ? 2u : 1u));  // backward: + dgamma
      CHECK(c.threads == c.specs.front().threads);
      CHECK(c.specs.front().traits.front() == "bf16");
    }
    CHECK(names.size() == candidates.size());
    CHECK(std::count_if(candidates.begin(), candidates.end(),
                        [](const Candidate& c) { return c.is_default; }) == 1);
    // 1000 columns: the 1024 bucket, 128 threads of 8 values, 8-wide (16 bytes of bf16).
    CHECK(default_of(candidates).name == "c1024.t128.v8");
    CHECK(p.op() == (backward ? "layer-norm-backward" : "layer-norm"));
  }
  // x and y, gamma and beta, mean and rstd (bf16 tensors, fp32 statistics).
  CHECK(norm_problem(100, 1000).bytes() == 2.0 * 100 * 1000 * 2 + 2.0 * 1000 * 2 + 800);
  kernels::LayerNormProblem fused = norm_problem(100, 1000);
  fused.norm.rms = fused.norm.bias = fused.norm.residual = true;
  // + residual and sum, + bias, - beta, - mean.
  CHECK(fused.bytes() == 4.0 * 100 * 1000 * 2 + 2.0 * 1000 * 2 + 400);
}

TEST_CASE("layer norm key: columns and rows bucketed, then the norm and fused adds") {
  const std::string key = tuning_key(norm_problem(100, 1000)).to_string();
  CHECK(key.starts_with("layer-norm/"));
  CHECK(key.ends_with("/bf16/c1024/r128/ln"));
  CHECK(tuning_key(norm_problem(65, 513)).to_string() == key);  // the same buckets
  CHECK(tuning_key(norm_problem(129, 1000)).to_string() != key);
  kernels::LayerNormProblem fused = norm_problem(100, 1000);
  fused.norm.rms = fused.norm.bias = fused.norm.residual = true;
  CHECK(tuning_key(fused).to_string().ends_with("/c1024/r128/rms.bias.residual"));
  kernels::LayerNormProblem backward = norm_problem(100, 1000, true);
  backward.norm.bias = true;
  CHECK(tuning_key(backward).to_string().starts_with("layer-norm-backward/"));
  CHECK(tuning_key(backward).to_string().ends_with("/c1024/r128/ln.dbias"));
  // The memo of a runtime's choices separates what the key separates.
  CHECK(TuningState::shape_class(norm_problem(100, 1000)) ==
        TuningState::shape_class(norm_problem(65, 513)));
  CHECK(TuningState::shape_class(norm_problem(100, 1000)) !=
        TuningState::shape_class(norm_problem(100, 1500)));
  CHECK(TuningState::shape_class(norm_problem(100, 1000)) != TuningState::shape_class(fused));
  CHECK(TuningState::shape_class(norm_problem(100, 1000)) !=
        TuningState::shape_class(norm_problem(100, 1000, true)));
}

TEST_CASE("layer norm static pruning: buckets that cannot hold the row, or hold it with room") {
  SUBCASE("1000 columns: c256 and c512 cannot, c2048 and up are larger than c1024") {
    const kernels::LayerNormProblem p = norm_problem(100, 1000);
    std::vector<Candidate> candidates = enumerate_candidates(p, "sm_90a");
    prune_static(candidates, p, 227 * 1024);
    int kept = 0;
    for (const Candidate& c : candidates) {
      CAPTURE(c.name);
      if (c.name.starts_with("c256.") || c.name.starts_with("c512.")) {
        CHECK(c.pruned.find(" columns, not 1000") != std::string::npos);
      } else if (c.name.starts_with("c2048.") || c.name.starts_with("c4096.") ||
                 c.name.starts_with("c8192.")) {
        CHECK(c.pruned.find(" > c1024, the smallest bucket that holds 1000 columns") !=
              std::string::npos);
      } else {
        CHECK(c.pruned.empty());  // c1024 and the unbounded bucket
        kept += 1;
      }
    }
    // c1024: threads 64 and 128 (1- and 8-wide), 256, 512 and 1024; the unbounded: 512 and
    // 1024 threads, 1- and 8-wide.
    CHECK(kept == 7 + 4);
    CHECK(!p.cannot_run(candidates.front().config.get<kernels::LayerNormConfig>()).empty());
  }
  SUBCASE("5000 columns: the 8192 bucket and the unbounded one, the default unbounded") {
    const kernels::LayerNormProblem p = norm_problem(100, 5000, true);
    std::vector<Candidate> candidates = enumerate_candidates(p, "sm_90a");
    prune_static(candidates, p, 227 * 1024);
    for (const Candidate& c : candidates) {
      CAPTURE(c.name);
      CHECK(c.pruned.empty() == (c.name.starts_with("cany.") || c.name.starts_with("c8192.")));
    }
    // The unbounded config's stash, not the 8192 bucket's registers (its backward spills).
    CHECK(default_of(candidates).name == "cany.t1024.v8");
  }
}

TEST_CASE("layer norm tuning on the emulator: forward and backward checked, timed and stored") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  Runtime runtime(RuntimeOptions{.backend = Backend::emulator, .tuning = TuningPolicy::cached});
  TuningState& state = detail::tuning_of(runtime);
  TuneOptions options;
  options.jobs = 1;
  options.timing = {.warmup_runs = 0, .min_runs = 1, .max_runs = 1, .budget_ms = 1};
  for (bool backward : {false, true}) {
    CAPTURE(backward);
    kernels::LayerNormProblem p = norm_problem(8, 200, backward);
    p.norm.bias = true;  // forward: a fused bias add; backward: dbias
    options.only = {"c256.t128.v1", "cany.t512.v8"};
    const TuneReport report = tune(state, p, options);
    REQUIRE(report.timings.size() == 3);  // the default (c256.t32.v8) and the two selected
    for (const CandidateTiming& t : report.timings) {
      CHECK_MESSAGE(std::isfinite(t.median_ms), t.config << ": " << t.status);
      CHECK(t.status == "ok");  // each equals the default's outputs within rounding
    }
    CHECK(report.entry.default_config == "c256.t32.v8");
    CHECK(report.bytes == p.bytes());
    REQUIRE(std::filesystem::exists(report.database));
    CHECK(TuningDatabase::load(report.database, state.meta()).find(report.key).has_value());
  }
}

TEST_CASE("a cached runtime's layer_norm and its backward run the database's winners") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  testing::LayerNormCase c;
  c.rows = 6;
  c.cols = 200;
  c.dtype = DType::bf16;
  c.bias = true;
  {
    Runtime writer(RuntimeOptions{.backend = Backend::emulator});
    // Entries of other shapes in the same buckets (8 rows, 256 columns).
    kernels::LayerNormProblem forward = norm_problem(7, 250);
    forward.norm.bias = true;
    store_winner(detail::tuning_of(writer), forward, "cany.t512.v1");
    kernels::LayerNormProblem backward = norm_problem(5, 129, true);
    backward.norm.bias = true;
    store_winner(detail::tuning_of(writer), backward, "c256.t128.v1");
  }
  Runtime cached(RuntimeOptions{.backend = Backend::emulator, .tuning = TuningPolicy::cached});
  cached.reset_emulated_work();
  const testing::LayerNormVerdict verdict = testing::run_layer_norm_backward_case(cached, c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  CHECK(ran(cached, "layer_norm.bf16.ln.colsany.t512.v1"));
  CHECK(ran(cached, "layer_norm_backward.bf16.ln.cols256.t128.v1"));
  CHECK_FALSE(ran(cached, "layer_norm.bf16.ln.cols256.t32.v8"));  // the default's

  // Policy off ignores the database.
  Runtime off(RuntimeOptions{.backend = Backend::emulator, .tuning = TuningPolicy::off});
  off.reset_emulated_work();
  CHECK(testing::run_layer_norm_backward_case(off, c).ok);
  CHECK(ran(off, "layer_norm.bf16.ln.cols256.t32.v8"));
  CHECK(ran(off, "layer_norm_backward.bf16.ln.cols256.t32.v8"));
}
