// GPU tests (label `gpu`) of the autotuner: a small shape tuned end to end writes an entry the
// next Runtime uses without timing again, every candidate that survives pruning computes the
// same result as the default, and the winner is not slower than the default beyond noise.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/attention_tuning.hpp"
#include "attention/inference/decode_tuning.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_state.hpp"
#include "flashjit/flashjit.hpp"
#include "layer_norm/layer_norm_tuning.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using namespace flashjit::autotune;
using flashjit::testing::ScopedEnv;
using flashjit::testing::TempDir;

namespace {

kernels::AttentionProblem small_problem(bool backward, int head_dim, bool causal) {
  kernels::AttentionProblem p(backward, DType::bf16, {});
  p.attention.batch = 2;
  p.attention.heads_q = p.attention.heads_kv = 8;
  p.attention.seqlen_q = p.attention.seqlen_k = 1024;
  p.attention.head_dim = head_dim;
  p.attention.causal = causal;
  return p;
}

double median_ms(const std::vector<CandidateTiming>& timings, const std::string& config) {
  for (const CandidateTiming& t : timings) {
    if (t.config == config) return t.median_ms;
  }
  return std::nan("");
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void check_end_to_end(const TuningProblem& problem) {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  Runtime runtime(RuntimeOptions{.tuning = TuningPolicy::cached});
  TuneOptions options;
  options.timing.budget_ms = 100;
  const TuneReport report = tune(detail::tuning_of(runtime), problem, options);
  INFO(report.key.to_string());
  REQUIRE(!report.timings.empty());
  // Every kernel that survives pruning is correct: none may be reported wrong or fail.
  for (const CandidateTiming& t : report.timings) {
    CHECK_MESSAGE(t.status == "ok", t.config << ": " << t.status);
    CHECK(std::isfinite(t.median_ms));
  }
  REQUIRE(!report.entry.winner.empty());
  CHECK(report.database == detail::tuning_of(runtime).database());

  // The next Runtime, even under auto, takes the stored winner without timing.
  const int tunings = tunings_in_process();
  Runtime next(RuntimeOptions{.tuning = TuningPolicy::automatic});
  CHECK(choose_config(detail::tuning_of(next), problem).name() == report.entry.winner);
  CHECK(tunings_in_process() == tunings);

  // Re-timed side by side, the winner is not slower than the default beyond the noise.
  if (report.entry.winner == report.entry.default_config) return;
  TuneOptions again = options;
  again.persist = false;
  again.only = {report.entry.winner};
  std::vector<double> winner, fallback;
  for (int round = 0; round < 3; ++round) {
    const TuneReport r = tune(detail::tuning_of(runtime), problem, again);
    winner.push_back(median_ms(r.timings, report.entry.winner));
    fallback.push_back(median_ms(r.timings, report.entry.default_config));
  }
  CHECK_MESSAGE(median(winner) <= median(fallback) * 1.05 + 0.005,
                "winner " << median(winner) << " ms, default " << median(fallback) << " ms");
}

}  // namespace

TEST_CASE("autotune on the GPU: forward, head dim 64 and 128, causal and not") {
  for (int head_dim : {64, 128}) {
    for (bool causal : {false, true}) {
      check_end_to_end(small_problem(false, head_dim, causal));
    }
  }
}

TEST_CASE("autotune on the GPU: backward, head dim 128") {
  check_end_to_end(small_problem(true, 128, false));
}

TEST_CASE("autotune on the GPU: decoding on a paged cache, GQA 8:1, one and four queries") {
  for (std::int64_t queries : {1, 4}) {
    Attention a;
    a.batch = 8;
    a.heads_q = 32;
    a.heads_kv = 4;
    a.seqlen_q = queries;
    a.seqlen_k = 4096;
    a.head_dim = 128;
    check_end_to_end(kernels::DecodeProblem(DType::bf16, a, {true, 16},
                                            Runtime(RuntimeOptions{}).device().sm_count));
  }
}

TEST_CASE("autotune on the GPU: layer norm and its backward, 1024 and 4096 columns") {
  for (bool backward : {false, true}) {
    for (int cols : {1024, 4096}) {
      check_end_to_end(
          kernels::LayerNormProblem(backward, DType::bf16, {8192, cols, false, false, false}));
    }
  }
}
