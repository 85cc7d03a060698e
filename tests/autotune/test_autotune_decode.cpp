// The autotuner's attention-decode op without a GPU: its candidates (the mma.sync and decode
// kernels' tiles with the call's layout flags, times the split counts), its key (bucketed by
// batch, context and heads per KV head), static pruning, tuning end to end on the emulator, and
// Runtime::forward with Sequences running the tuned config under the cached policy.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "api/runtime_parts.hpp"
#include "attention/check/inference_case.hpp"
#include "attention/inference/decode_tuning.hpp"
#include "autotune/candidates.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_state.hpp"
#include "flashjit/flashjit.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using namespace flashjit::autotune;
using flashjit::testing::ScopedEnv;
using flashjit::testing::TempDir;

namespace {

// One decoding step: `batch` sequences of one query at `context` keys, 8 query heads per key/
// value head, on pages of 16 keys.
kernels::DecodeProblem decode_problem(std::int64_t batch, std::int64_t context,
                                      int sm_count = 132) {
  Attention a;
  a.batch = batch;
  a.heads_q = 8;
  a.heads_kv = 1;
  a.seqlen_q = 1;
  a.seqlen_k = context;
  a.head_dim = 64;
  return kernels::DecodeProblem(DType::bf16, a, {true, 16}, sm_count);
}

const kernels::InferenceConfig& inference_of(const Candidate& c) {
  return c.config.get<kernels::InferenceConfig>();
}

std::string suffix_of(int splits) { return ".splits" + std::to_string(splits); }

}  // namespace

TEST_CASE(
    "decode candidates: the mma.sync and decode tiles with the call's layout flags, x splits") {
  const kernels::DecodeProblem p = decode_problem(2, 4096);
  const std::vector<Candidate> candidates = enumerate_candidates(p, "sm_90a");
  REQUIRE(!candidates.empty());
  std::set<std::string> tiles;
  int defaults = 0, decode_tiles = 0;
  for (const Candidate& c : candidates) {
    const kernels::InferenceConfig& config = inference_of(c);
    CAPTURE(c.name);
    const bool decode = config.forward.path() == kernels::ForwardPath::decode;
    CHECK((decode || config.forward.path() == kernels::ForwardPath::mma_sync));
    decode_tiles += decode && !c.is_default ? 1 : 0;
    CHECK(config.forward.varlen);
    CHECK(config.forward.paged);
    CHECK(config.forward.pack_gqa);  // 8 query heads share each key/value head
    CHECK(config.forward.split == (config.splits > 1));
    CHECK(c.name.ends_with(suffix_of(config.splits)));
    // The forward, then the merge; the decode kernel merges its splits itself.
    CHECK(c.specs.size() == (config.splits > 1 && !decode ? 2u : 1u));
    defaults += c.is_default ? 1 : 0;
    if (!c.is_default) {
      const auto* in_space = std::find(std::begin(kernels::kDecodeSplits),
                                       std::end(kernels::kDecodeSplits), config.splits);
      CHECK(in_space != std::end(kernels::kDecodeSplits));
      tiles.insert(c.name.substr(0, c.name.size() - suffix_of(config.splits).size()));
    }
  }
  CHECK(defaults == 1);
  CHECK(candidates.size() == tiles.size() * std::size(kernels::kDecodeSplits));
  // 2 sequences x 1 key/value head fill 2 of 132 SMs: the default (8 warps of 16-key chunks)
  // splits each sequence's 32 rounds of 128 keys 16 ways (at least two rounds a split), a
  // candidate of the space itself.
  const Candidate& fallback = *std::find_if(candidates.begin(), candidates.end(),
                                            [](const Candidate& c) { return c.is_default; });
  CHECK(inference_of(fallback).splits == 16);
  CHECK(inference_of(fallback).forward.path() == kernels::ForwardPath::decode);
  CHECK(fallback.config == p.default_config("sm_90a"));
  // The decode kernel's tiles (16 and 32 keys a chunk, 4 and 8 warps, 2, 3, 4 or 6 stages,
  // less 32 keys with 8 warps at 4 and 6 stages: past 227 KB), each with every split count,
  // beside the mma.sync tiles; the default is one of them.
  CHECK(decode_tiles + 1 == 14 * static_cast<int>(std::size(kernels::kDecodeSplits)));
  CHECK(p.bytes() == 2.0 * 2 * 4096 * 1 * 64 * 2);
  CHECK(p.flops() == 4.0 * 2 * 8 * 1 * 4096 * 64);
}

TEST_CASE("decode key: cache, batch, context, key/value heads and group, each bucketed") {
  const std::string key = tuning_key(decode_problem(5, 3000)).to_string();
  CHECK(key.starts_with("attention-decode/"));
  CHECK(key.ends_with("/bf16/hdim64/none/paged16/q1/k4096/b8/hkv1/g8"));
  // Same buckets, same entry; another batch bucket, page size or a dense cache, another.
  CHECK(tuning_key(decode_problem(7, 2049)).to_string() == key);
  CHECK(tuning_key(decode_problem(9, 3000)).to_string() != key);
  kernels::DecodeProblem dense = decode_problem(5, 3000);
  dense.cache = {true, 0};
  CHECK(tuning_key(dense).to_string().find("/varlen/") != std::string::npos);
  dense.cache = {false, 0};
  CHECK(tuning_key(dense).to_string().find("/dense/") != std::string::npos);
  kernels::DecodeProblem pages32 = decode_problem(5, 3000);
  pages32.cache.page_size = 32;
  CHECK(tuning_key(pages32).to_string().find("/paged32/") != std::string::npos);
  // The memo of a runtime's choices separates what the key separates.
  CHECK(TuningState::shape_class(decode_problem(5, 3000)) ==
        TuningState::shape_class(decode_problem(7, 2049)));
  CHECK(TuningState::shape_class(decode_problem(5, 3000)) != TuningState::shape_class(pages32));
}

TEST_CASE("decode static pruning: tiles past the packed rows, splits with no key block") {
  kernels::DecodeProblem p = decode_problem(2, 100);  // 128 keys' bucket, 8 packed rows
  std::vector<Candidate> candidates = enumerate_candidates(p, "sm_90a");
  prune_static(candidates, p, 227 * 1024);
  bool kept_some = false;
  for (const Candidate& c : candidates) {
    const kernels::InferenceConfig& config = inference_of(c);
    CAPTURE(c.name);
    const int block_n = config.forward.block_n;
    if (c.is_default) {
      CHECK(c.pruned.empty());
    } else if (config.forward.block_m > 64) {
      CHECK(c.pruned.find("query rows") != std::string::npos);
    } else if (config.splits > 1 && config.splits * block_n > 128) {
      CHECK(c.pruned.find("no key block") != std::string::npos);
    } else if (block_n <= 128) {
      CHECK(c.pruned.empty());
      kept_some = true;
    }
  }
  CHECK(kept_some);
}

TEST_CASE("decode tuning on the emulator: split counts checked, stored, then run by forward()") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  Runtime runtime(RuntimeOptions{.backend = Backend::emulator, .tuning = TuningPolicy::cached});
  TuningState& state = detail::tuning_of(runtime);
  kernels::DecodeProblem p = decode_problem(2, 256, runtime.device().sm_count);
  p.attention.heads_q = 4;  // 4 query heads per key/value head: small enough to emulate quickly
  const auto fallback = (p.default_config(runtime.device().arch())).get<kernels::InferenceConfig>();
  const std::string tile = TunedConfig(fallback.forward).name();
  TuneOptions options;
  options.jobs = 1;
  options.timing = {.warmup_runs = 0, .min_runs = 1, .max_runs = 1, .budget_ms = 1};
  REQUIRE(fallback.splits == 1);  // 256 keys are two rounds of the default's 8 warps
  options.only = {tile + ".splits2", tile + ".splits4"};
  const TuneReport report = tune(state, p, options);
  REQUIRE(report.timings.size() == 3);  // the default and the two selected
  for (const CandidateTiming& t : report.timings) {
    CHECK_MESSAGE(std::isfinite(t.median_ms), t.config << ": " << t.status);
    CHECK(t.status == "ok");  // each equals the default's output within rounding
  }
  CHECK(report.bytes == p.bytes());
  REQUIRE(std::filesystem::exists(report.database));
  CHECK(TuningDatabase::load(report.database, state.meta()).find(report.key).has_value());

  // An entry whose winner splits each block 4 ways: a cached runtime runs it for a shape of the
  // same buckets (fewer keys, another batch), and the result is still right.
  TuningEntry entry;
  entry.default_config = TunedConfig(fallback).name();
  entry.candidates = {{TunedConfig(fallback).name(), 2.0, "ok"}, {tile + ".splits4", 1.0, "ok"}};
  entry.winner = pick_winner(entry.default_config, entry.candidates);
  REQUIRE(entry.winner == tile + ".splits4");
  merge_into_file(state.database(), state.meta(), report.key, entry);
  Runtime cached(RuntimeOptions{.backend = Backend::emulator, .tuning = TuningPolicy::cached});
  testing::InferenceCase c;
  c.seqlens_q = {1, 1};
  c.seqlens_k = {200, 150};
  c.heads_q = 4;
  c.heads_kv = 1;
  c.keys = testing::KeyStorage::paged;
  cached.reset_emulated_work();
  const testing::InferenceVerdict verdict = testing::run_inference_case(cached, c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  std::uint64_t forward_ctas = 0;
  bool merged = false;
  for (const KernelWork& kernel : cached.emulated_work()) {
    if (kernel.kernel.starts_with("attention_forward")) forward_ctas += kernel.work.ctas;
    if (kernel.kernel.starts_with("merge_states")) merged = true;
  }
  CHECK(forward_ctas == 1 * 4 * 1 * 2);  // a query block, 4 splits, a key/value head, 2 sequences
  CHECK(!merged);                        // the decode kernel merges its splits in the same launch
}
