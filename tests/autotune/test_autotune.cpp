// The autotuner without a GPU: candidates and static pruning, pruning on real NVRTC resource
// reports, the occupancy arithmetic, the policy switch, and tuning end to end on the CPU
// emulator (its times mean nothing, but every step runs: compiles through the cache, output
// checks, timing, the database write, and a later Runtime using the entry without re-timing).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/attention_calls.hpp"
#include "attention/attention_tuning.hpp"
#include "autotune/candidates.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_state.hpp"
#include "flashjit/flashjit.hpp"
#include "runtime/kernel_cache.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using namespace flashjit::autotune;
using flashjit::testing::ScopedEnv;
using flashjit::testing::TempDir;

namespace {

kernels::AttentionProblem forward_problem(int head_dim, std::int64_t seqlen, bool causal = false) {
  kernels::AttentionProblem p(false, DType::bf16, {});
  p.attention.batch = 1;
  p.attention.heads_q = p.attention.heads_kv = 2;
  p.attention.seqlen_q = p.attention.seqlen_k = seqlen;
  p.attention.head_dim = head_dim;
  p.attention.causal = causal;
  return p;
}

const Candidate& find(const std::vector<Candidate>& candidates, const std::string& name) {
  const auto it = std::find_if(candidates.begin(), candidates.end(),
                               [&](const Candidate& c) { return c.name == name; });
  REQUIRE_MESSAGE(it != candidates.end(), "no candidate " << name);
  return *it;
}

std::vector<Candidate> only(std::vector<Candidate> candidates,
                            const std::vector<std::string>& names) {
  std::erase_if(candidates, [&](const Candidate& c) {
    return std::find(names.begin(), names.end(), c.name) == names.end();
  });
  return candidates;
}

const TunedConfig& config_of(const TuneReport& report, const std::string& name) {
  const auto it = std::find_if(report.candidates.begin(), report.candidates.end(),
                               [&](const Candidate& c) { return c.name == name; });
  REQUIRE_MESSAGE(it != report.candidates.end(), "no candidate " << name);
  return it->config;
}

Runtime emulated_runtime(TuningPolicy policy) {
  return Runtime(RuntimeOptions{.backend = Backend::emulator, .tuning = policy});
}

}  // namespace

TEST_CASE("candidates: the whole space, one default, FLOPs") {
  const kernels::AttentionProblem p = forward_problem(128, 4096);
  const std::vector<Candidate> candidates = enumerate_candidates(p, "sm_90a");
  CHECK(candidates.size() ==
        kernels::forward_configs(DType::bf16, 128, MaskKind::none, false).size());
  CHECK(std::count_if(candidates.begin(), candidates.end(),
                      [](const Candidate& c) { return c.is_default; }) == 1);
  for (const Candidate& c : candidates) {
    CHECK(c.specs.size() == 1);
    CHECK(c.pruned.empty());
  }
  // 4 · b · h · L² · d, halved for causal (FlashAttention's count); a window counts its pairs.
  CHECK(p.flops() == doctest::Approx(4.0 * 2 * 4096.0 * 4096.0 * 128));
  CHECK(forward_problem(128, 4096, true).flops() ==
        doctest::Approx(4.0 * 2 * (4096.0 * 4096.0 / 2) * 128));
  kernels::AttentionProblem window = forward_problem(128, 4096);
  window.attention.window_left = 127;
  window.attention.window_right = 0;
  // Row i sees min(i, 127) + 1 keys.
  const double pairs = 128.0 * 129.0 / 2 + (4096.0 - 128.0) * 128.0;
  CHECK(window.flops() == doctest::Approx(4.0 * 2 * pairs * 128));
  kernels::AttentionProblem backward = p;
  backward.backward = true;
  CHECK(backward.flops() == doctest::Approx(2.5 * p.flops()));
  // The Hopper paths are candidates on sm_90a only, beside the mma.sync path's; the TMA
  // path's is the default there.
  auto hopper = [](const std::vector<Candidate>& list) {
    return std::count_if(list.begin(), list.end(), [](const Candidate& c) {
      return c.name.ends_with(".wgmma") || c.name.find(".tma") != std::string::npos;
    });
  };
  // wgmma; TMA: 56 with two stages, 24 with three, and the 43 overlapped ones with P in
  // registers again persistent and again in 2-CTA clusters (19 of each with three stages)
  CHECK(hopper(candidates) == 4 + 123 + 43);
  CHECK(std::count_if(candidates.begin(), candidates.end(), [](const Candidate& c) {
          return c.name.find(".s3.tma.overlap") != std::string::npos;
        }) == 24 + 19 + 19);
  CHECK(std::count_if(candidates.begin(), candidates.end(),
                      [](const Candidate& c) { return c.name.ends_with(".cluster2"); }) == 43);
  CHECK(std::count_if(candidates.begin(), candidates.end(), [](const Candidate& c) {
          return c.name.ends_with(".persistent");
        }) == 43);
  CHECK(hopper(enumerate_candidates(p, "sm_80")) == 0);
  CHECK(find(candidates, "br128.bc176.w12.s2.tma.overlap.pingpong.cluster2").is_default);
  CHECK_FALSE(find(candidates, "br128.bc128.w8.s1.wgmma").is_default);
  const std::vector<Candidate> backward_candidates = enumerate_candidates(backward, "sm_90a");
  REQUIRE(!backward_candidates.empty());
  CHECK(backward_candidates.front().specs.size() >= 3);  // delta, dQ, dK/dV
}

TEST_CASE("the attention key names every field with the sizes bucketed") {
  // From the tuning database's tests: the key's shape is the op's now.
  kernels::AttentionProblem p = forward_problem(128, 1000);
  p.attention.batch = 3;
  p.attention.heads_q = p.attention.heads_kv = 8;  // 24 heads in all: bucket 32
  p.attention.window_left = 64;
  p.attention.window_right = 0;
  CHECK(p.key() == "bf16/hdim128/window/q1024/k1024/bh32");
  const TuningKey key = tuning_key(p);
  CHECK(key.to_string() == "attention-forward/" + key.template_hash + "/" + p.key());

  SUBCASE("softcap follows the mask, then the backward's deterministic mode") {
    p.attention.softcap = 30.0f;
    CHECK(p.key() == "bf16/hdim128/window.softcap/q1024/k1024/bh32");
    p.backward = p.attention.deterministic = true;
    CHECK(p.key() == "bf16/hdim128/window.softcap.deterministic/q1024/k1024/bh32");
    CHECK(tuning_key(p).op == "attention-backward");
  }
  SUBCASE("q, k and bh are bucketed separately") {
    p.attention.seqlen_q = 100;
    p.attention.seqlen_k = 5000;
    p.attention.batch = 1;
    p.attention.heads_q = p.attention.heads_kv = 1;
    CHECK(p.key() == "bf16/hdim128/window/q128/k8192/bh1");
  }
  SUBCASE("the memo separates what the key separates") {
    kernels::AttentionProblem same = p;
    same.attention.seqlen_q = same.attention.seqlen_k = 600;
    CHECK(same.key() == p.key());
    CHECK(TuningState::shape_class(same) == TuningState::shape_class(p));
    same.attention.seqlen_k = 1025;
    CHECK(TuningState::shape_class(same) != TuningState::shape_class(p));
    kernels::AttentionProblem f16 = p;
    f16.dtype = DType::f16;
    CHECK(TuningState::shape_class(f16) != TuningState::shape_class(p));
  }
}

TEST_CASE("deterministic backward: each kernel's tiles beside the other's default, then a pair") {
  kernels::AttentionProblem p = forward_problem(128, 4096);
  p.backward = true;
  p.attention.deterministic = true;
  // sm_90a's default is the TMA backward (no dQ kernel): the pairs are the mma.sync tiles'.
  const auto fallback = kernels::backward_pairing_base(
      p.default_config("sm_90a").get<kernels::BackwardConfig>(), "sm_90a");
  REQUIRE(fallback.deterministic);
  REQUIRE_FALSE(fallback.tma);
  // The space holds every pair of a dK/dV tile and a dQ tile; the tuner times n + m - 1 of
  // them, beside the TMA configs (timed alone).
  std::vector<kernels::KeyBlockTile> keys;
  std::vector<kernels::QueryBlockTile> queries;
  const std::vector<TunedConfig> space = p.space();
  for (const TunedConfig& config : space) {
    const auto& b = config.get<kernels::BackwardConfig>();
    if (b.query == fallback.query) keys.push_back(b.key);
    if (b.key == fallback.key) queries.push_back(b.query);
  }
  REQUIRE(keys.size() >= 3);
  REQUIRE(queries.size() >= 3);
  const std::vector<Candidate> candidates = enumerate_candidates(p, "sm_90a");
  CHECK(candidates.size() == keys.size() + queries.size() - 1);
  CHECK(candidates.size() < space.size());
  for (const Candidate& c : candidates) {
    const auto& b = c.config.get<kernels::BackwardConfig>();
    CHECK_MESSAGE((b.key == fallback.key || b.query == fallback.query), c.name);
  }

  // The fastest dK/dV tile (beside the default dQ tile) with the fastest dQ tile (beside the
  // default dK/dV tile), whatever their pairs' own times.
  TuneReport report;
  report.candidates = candidates;
  const Candidate* fast_key = nullptr;
  const Candidate* fast_query = nullptr;
  for (const Candidate& c : candidates) {
    const auto& b = c.config.get<kernels::BackwardConfig>();
    double ms = 9.0;
    if (c.is_default) {
      ms = 10.0;
    } else if (b.query == fallback.query && fast_key == nullptr) {
      fast_key = &c;
      ms = 5.0;
    } else if (b.key == fallback.key && fast_query == nullptr) {
      fast_query = &c;
      ms = 6.0;
    }
    report.timings.push_back({c.name, ms, "ok"});
  }
  REQUIRE((fast_key != nullptr && fast_query != nullptr));
  const std::optional<TunedConfig> found = p.fastest_pair(report.candidates, report.timings);
  REQUIRE(found.has_value());
  const auto& pair = found->get<kernels::BackwardConfig>();
  CHECK(pair.key == fast_key->config.get<kernels::BackwardConfig>().key);
  CHECK(pair.query == fast_query->config.get<kernels::BackwardConfig>().query);
  CHECK(pair.valid());

  // When the default's dK/dV tile is the fastest, the best pair was timed already.
  for (CandidateTiming& t : report.timings) {
    const auto& b = config_of(report, t.config).get<kernels::BackwardConfig>();
    if (b.key != fallback.key) t.median_ms = 11.0;
  }
  CHECK_FALSE(p.fastest_pair(report.candidates, report.timings).has_value());
  // A side with no finite time, or a problem that is not the deterministic backward: nothing.
  for (CandidateTiming& t : report.timings) {
    const auto& b = config_of(report, t.config).get<kernels::BackwardConfig>();
    t.median_ms = b.key == fallback.key ? std::numeric_limits<double>::infinity() : 5.0;
  }
  CHECK_FALSE(p.fastest_pair(report.candidates, report.timings).has_value());
  const kernels::AttentionProblem forward = forward_problem(128, 4096);
  CHECK_FALSE(forward.fastest_pair(enumerate_candidates(forward, "sm_90a"), {}).has_value());
}

TEST_CASE("static pruning: shared memory over the limit, tiles larger than the problem") {
  const kernels::AttentionProblem p = forward_problem(64, 48);
  std::vector<Candidate> candidates = enumerate_candidates(p, "sm_80");
  const int limit = 40 * 1024;
  prune_static(candidates, p, limit);
  int kept = 0;
  for (const Candidate& c : candidates) {
    const auto& config = c.config.get<kernels::ForwardConfig>();
    if (c.shared_bytes > limit) {
      CHECK_MESSAGE(c.pruned.find("shared memory") == 0, c.name << ": " << c.pruned);
    } else if (c.is_default) {
      CHECK(c.pruned.empty());  // the baseline stays whatever its size
    } else if (config.block_m > 64) {
      CHECK_MESSAGE(c.pruned.find("Br 128 > 64 query rows") == 0, c.name << ": " << c.pruned);
    } else if (config.block_n > 64) {
      CHECK_MESSAGE(c.pruned.find("Bc 128 > 64 keys") == 0, c.name << ": " << c.pruned);
    } else {
      CHECK_MESSAGE(c.pruned.empty(), c.name << ": " << c.pruned);
      ++kept;
    }
  }
  CHECK(kept > 0);
}

TEST_CASE("occupancy arithmetic") {
  CHECK(detail::blocks_per_sm(128, 128, 0, 227 * 1024, "sm_90a") == 4);   // registers bound
  CHECK(detail::blocks_per_sm(255, 256, 0, 227 * 1024, "sm_90a") == 1);   // 255 rounds to 256
  CHECK(detail::blocks_per_sm(128, 1024, 0, 227 * 1024, "sm_90a") == 0);  // 128 K registers
  CHECK(detail::blocks_per_sm(32, 128, 100 * 1024, 227 * 1024, "sm_90a") == 2);  // shared bound
  CHECK(detail::blocks_per_sm(32, 128, 228 * 1024, 227 * 1024, "sm_90a") == 0);
  CHECK(detail::blocks_per_sm(16, 512, 0, 99 * 1024, "sm_89") == 3);  // 1536 threads per SM
}

TEST_CASE("a kernel with a ptxas performance advisory is pruned, naming it") {
  detail::KernelSpec spec;
  spec.role = "forward";
  spec.threads = 384;
  spec.dynamic_shared_bytes = 100 * 1024;
  detail::ResourceUsage clean;
  clean.registers = 168;
  CHECK(resource_problem(spec, clean, 227 * 1024, "sm_90a").empty());
  detail::ResourceUsage serialized = clean;
  serialized.advisories = {"C7514: wgmma.mma_async instructions are serialized"};
  const std::string why = resource_problem(spec, serialized, 227 * 1024, "sm_90a");
  CHECK(why == "ptxas advisory in forward: C7514: wgmma.mma_async instructions are serialized");
  detail::ResourceUsage spilling = serialized;
  spilling.spill_store_bytes = 8;
  CHECK(resource_problem(spec, spilling, 227 * 1024, "sm_90a") == "spills 8 B in forward");
}

TEST_CASE("resource pruning on real NVRTC reports") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  // Head dim 64 on sm_80: Br = Bc = 128 over 4 warps holds S and O for 32 rows per warp and
  // spills (ptxas reported 328 B with CUDA 13.0), while the default is measured not to.
  const kernels::AttentionProblem p = forward_problem(64, 4096);
  std::vector<Candidate> all = enumerate_candidates(p, "sm_80");
  const auto fallback =
      std::find_if(all.begin(), all.end(), [](const Candidate& c) { return c.is_default; });
  REQUIRE(fallback != all.end());
  std::vector<Candidate> candidates = only(all, {fallback->name, "br128.bc128.w4.s2"});
  REQUIRE(candidates.size() == 2);
  prune_on_resources(candidates, "sm_80", 163 * 1024, 2);
  const Candidate& big = find(candidates, "br128.bc128.w4.s2");
  CHECK_MESSAGE(big.pruned.find("spills") == 0, big.pruned);
  CHECK_MESSAGE(big.pruned.find("in forward") != std::string::npos, big.pruned);
  for (const Candidate& c : candidates) {
    REQUIRE(c.resources.size() == c.specs.size());
    bool spills = false;
    for (const detail::ResourceUsage& r : c.resources) {
      spills |= r.spill_bytes() > 0;
      CHECK(r.registers > 0);
    }
    CHECK_MESSAGE(spills == !c.pruned.empty(), c.name << ": " << c.pruned);
  }
}

TEST_CASE("output check: rounding noise passes, a wrong kernel is reported") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> reference(4096);
  for (float& x : reference) x = normal(rng);
  // Another correct kernel: the same values, each off by up to one bf16 rounding step.
  std::vector<float> rounded = reference;
  for (float& x : rounded) x = float_from_bf16_bits(bf16_bits_from_float(x * (1.0f + 0x1p-9f)));
  CHECK(compare_outputs(reference, reference, DType::bf16).empty());
  CHECK(compare_outputs(rounded, reference, DType::bf16).empty());
  // Wrong kernels: rows swapped, one NaN, a missing scale, a short output.
  std::vector<float> swapped = reference;
  std::rotate(swapped.begin(), swapped.begin() + 64, swapped.end());
  CHECK(compare_outputs(swapped, reference, DType::bf16).find("wrong result") == 0);
  std::vector<float> nan = reference;
  nan[100] = std::nanf("");
  CHECK(!compare_outputs(nan, reference, DType::bf16).empty());
  std::vector<float> scaled = reference;
  for (float& x : scaled) x *= 1.1f;
  CHECK(!compare_outputs(scaled, reference, DType::bf16).empty());
  CHECK(!compare_outputs(std::vector<float>(10), reference, DType::bf16).empty());
  // fp16 rounds 8 times finer, so its bound is tighter.
  CHECK(compare_outputs(rounded, reference, DType::f16).find("wrong result") == 0);
}

TEST_CASE("policy: FLASHJIT_TUNING overrides the option, bad values are named") {
  {
    ScopedEnv env("FLASHJIT_TUNING", nullptr);
    CHECK(effective_policy(TuningPolicy::cached) == TuningPolicy::cached);
    CHECK(effective_policy(TuningPolicy::off) == TuningPolicy::off);
  }
  {
    ScopedEnv env("FLASHJIT_TUNING", "off");
    CHECK(effective_policy(TuningPolicy::automatic) == TuningPolicy::off);
    CHECK(emulated_runtime(TuningPolicy::cached).tuning_policy() == TuningPolicy::off);
  }
  {
    ScopedEnv env("FLASHJIT_TUNING", "auto");
    CHECK(effective_policy(TuningPolicy::off) == TuningPolicy::automatic);
  }
  ScopedEnv env("FLASHJIT_TUNING", "fastest");
  try {
    emulated_runtime(TuningPolicy::cached);
    FAIL("an unknown policy was accepted");
  } catch (const InvalidArgument& error) {
    CHECK(error.argument() == "FLASHJIT_TUNING");
    CHECK(std::string(error.what()).find("off, cached or auto") != std::string::npos);
  }
}

TEST_CASE("policy: forward follows the database under cached, not under off") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  const kernels::AttentionProblem p = forward_problem(64, 256);
  Runtime writer = emulated_runtime(TuningPolicy::off);
  const kernels::ForwardConfig fallback =
      (choose_config(detail::tuning_of(writer), p)).get<kernels::ForwardConfig>();
  // An entry whose winner is another config the emulator has (the ops' emulated instances).
  TuningEntry entry;
  entry.default_config = TunedConfig(fallback).name();
  entry.candidates = {{TunedConfig(fallback).name(), 2.0, "ok"}, {"br64.bc64.w4.s1", 1.0, "ok"}};
  entry.winner = pick_winner(entry.default_config, entry.candidates);
  REQUIRE(entry.winner == "br64.bc64.w4.s1");
  merge_into_file(detail::tuning_of(writer).database(), detail::tuning_of(writer).meta(),
                  tuning_key(p), entry);

  Runtime cached = emulated_runtime(TuningPolicy::cached);
  const auto chosen = (choose_config(detail::tuning_of(cached), p)).get<kernels::ForwardConfig>();
  CHECK(TunedConfig(chosen).name() == "br64.bc64.w4.s1");
  // Another bucket of the same op is not covered by the entry.
  CHECK((choose_config(detail::tuning_of(cached), forward_problem(64, 4096)))
            .get<kernels::ForwardConfig>() == fallback);
  Runtime off = emulated_runtime(TuningPolicy::off);
  CHECK((choose_config(detail::tuning_of(off), p)).get<kernels::ForwardConfig>() == fallback);
  // A winner this build does not have falls back to the default.
  entry.candidates = {{TunedConfig(fallback).name(), 2.0, "ok"}, {"br512.bc64.w4.s1", 1.0, "ok"}};
  entry.winner = "br512.bc64.w4.s1";
  merge_into_file(detail::tuning_of(writer).database(), detail::tuning_of(writer).meta(),
                  tuning_key(p), entry);
  Runtime stale = emulated_runtime(TuningPolicy::cached);
  CHECK((choose_config(detail::tuning_of(stale), p)).get<kernels::ForwardConfig>() == fallback);
}

TEST_CASE("tuning end to end on the emulator: measured, written, reused without re-timing") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  // No host compiler: the emulator runs only its build-time kernels, so a candidate outside
  // them fails to launch, as any candidate may.
  ScopedEnv no_compiler("FLASHJIT_HOST_CXX", "/nonexistent/c++");
  const kernels::AttentionProblem p = forward_problem(64, 128);
  Runtime runtime = emulated_runtime(TuningPolicy::cached);
  TuneOptions options;
  options.jobs = 2;
  options.timing = {.warmup_runs = 1, .min_runs = 2, .max_runs = 3, .budget_ms = 1};
  // Two configs the emulator was built with and one it was not (which fails to launch).
  options.only = {"br64.bc64.w4.s1", "br128.bc32.w8.s1", "br64.bc32.w4.s1"};
  int phases = 0;
  options.progress = [&](const char*, int, int) { ++phases; };
  const TuneReport report = tune(detail::tuning_of(runtime), p, options);
  CHECK(phases > 0);
  REQUIRE(report.timings.size() == 4);  // the default and the three selected
  for (const CandidateTiming& t : report.timings) {
    if (t.config == "br64.bc32.w4.s1") {
      CHECK(std::isinf(t.median_ms));
      CHECK_MESSAGE(t.status.find("failed") == 0, t.status);
    } else {
      CHECK_MESSAGE(std::isfinite(t.median_ms), t.config << ": " << t.status);
      CHECK(t.status == "ok");
    }
  }
  CHECK(report.entry.winner == pick_winner(report.entry.default_config, report.timings));
  CHECK(report.database == detail::tuning_of(runtime).database());
  REQUIRE(std::filesystem::exists(report.database));
  const TuningDatabase db =
      TuningDatabase::load(report.database, detail::tuning_of(runtime).meta());
  REQUIRE(db.find(report.key).has_value());
  CHECK(db.find(report.key)->winner == report.entry.winner);

  // Tuning again compiles nothing: every candidate's kernels are in the cache.
  const int compiles = detail::KernelCache::process_cache().stats().compiles.load();
  const TuneReport again = tune(detail::tuning_of(runtime), p, options);
  CHECK(detail::KernelCache::process_cache().stats().compiles.load() == compiles);

  // A new Runtime, even under auto, uses the stored winner (of the latest timings, which may
  // differ from the first under load) without timing anything.
  const int tunings = tunings_in_process();
  Runtime next = emulated_runtime(TuningPolicy::automatic);
  const TunedConfig chosen = choose_config(detail::tuning_of(next), p);
  CHECK(TunedConfig(chosen).name() == again.entry.winner);
  CHECK(tunings_in_process() == tunings);
}

TEST_CASE("policy auto: forward() tunes a new shape once, stores it, and reuses it") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  // No host compiler, so the emulator runs its build-time kernels only (and tuning takes
  // seconds, not a host compile per candidate).
  ScopedEnv no_compiler("FLASHJIT_HOST_CXX", "/nonexistent/c++");
  // 64 tokens: static pruning leaves the small tiles (and the default) to compile and time.
  const kernels::AttentionProblem p = forward_problem(64, 64);
  const Attention& a = p.attention;
  Runtime runtime = emulated_runtime(TuningPolicy::automatic);
  const std::size_t elements = static_cast<std::size_t>(a.batch * a.seqlen_q * a.heads_q * 64);
  std::vector<DeviceBuffer> buffers;
  std::vector<TensorView> views;
  for (int i = 0; i < 4; ++i) {
    buffers.push_back(runtime.allocate(elements * 2));
    const std::vector<std::uint16_t> zeros(elements, 0);
    runtime.copy_to_device(buffers.back().data(), zeros.data(), elements * 2);
    views.push_back(attention_tensor(buffers.back().data(), DType::bf16, Layout::bshd, a.batch,
                                     a.seqlen_q, a.heads_q, a.head_dim));
  }
  const TensorView no_lse = lse_tensor(nullptr, a);
  const int before = tunings_in_process();
  runtime.forward(a, views[0], views[1], views[2], views[3], no_lse);
  CHECK(tunings_in_process() == before + 1);
  runtime.forward(a, views[0], views[1], views[2], views[3], no_lse);
  CHECK(tunings_in_process() == before + 1);
  const TuningDatabase db = TuningDatabase::load(detail::tuning_of(runtime).database(),
                                                 detail::tuning_of(runtime).meta());
  REQUIRE(db.find(tuning_key(p)).has_value());
  const TuningEntry entry = *db.find(tuning_key(p));
  CHECK(choose_config(detail::tuning_of(runtime), p).name() == entry.winner);
  // Configs the emulator was not built with were compiled by NVRTC (for the resource report),
  // then failed to launch: reported.
  const auto failed =
      std::count_if(entry.candidates.begin(), entry.candidates.end(),
                    [](const CandidateTiming& t) { return std::isinf(t.median_ms); });
  CHECK(failed > 0);
  CHECK(failed < static_cast<long>(entry.candidates.size()));
}

TEST_CASE("policy: backward() goes through the same choice, tuned under auto") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  // 32 tokens: static pruning leaves the dK/dV tiles of Br = Bc = 32 beside the default.
  kernels::AttentionProblem p = forward_problem(64, 32);
  p.backward = true;
  const Attention& a = p.attention;
  Runtime runtime = emulated_runtime(TuningPolicy::automatic);
  const std::size_t elements = static_cast<std::size_t>(a.batch * a.seqlen_q * a.heads_q * 64);
  const std::vector<std::uint16_t> zeros(elements, 0);
  std::vector<DeviceBuffer> buffers;
  std::vector<TensorView> views;  // q, k, v, o, dout, dq, dk, dv
  for (int i = 0; i < 8; ++i) {
    buffers.push_back(runtime.allocate(elements * 2));
    runtime.copy_to_device(buffers.back().data(), zeros.data(), elements * 2);
    views.push_back(attention_tensor(buffers.back().data(), DType::bf16, Layout::bshd, a.batch,
                                     a.seqlen_q, a.heads_q, a.head_dim));
  }
  DeviceBuffer lse_buffer = runtime.allocate(static_cast<std::size_t>(a.heads_q * a.seqlen_q) * 4);
  const TensorView lse = lse_tensor(static_cast<float*>(lse_buffer.data()), a);
  runtime.forward(a, views[0], views[1], views[2], views[3], lse);
  const int before = tunings_in_process();
  runtime.backward(a, views[0], views[1], views[2], views[3], lse, views[4], views[5], views[6],
                   views[7]);
  CHECK(tunings_in_process() == before + 1);
  const TuningDatabase db = TuningDatabase::load(detail::tuning_of(runtime).database(),
                                                 detail::tuning_of(runtime).meta());
  REQUIRE(db.find(tuning_key(p)).has_value());
  const TuningEntry entry = *db.find(tuning_key(p));
  CHECK(entry.candidates.size() >= 2);
  for (const CandidateTiming& t : entry.candidates) {
    CHECK_MESSAGE(t.status == "ok", t.status);
    CHECK_MESSAGE((t.config == entry.default_config || t.config.starts_with("br32.bc32.")),
                  t.config);
  }

  // Under cached, a stored winner is what backward runs, whichever it is.
  for (const std::string& winner : {std::string("br32.bc32.w2.s1"), entry.default_config}) {
    TuningEntry forced = entry;
    for (CandidateTiming& t : forced.candidates) t.median_ms = t.config == winner ? 1.0 : 2.0;
    merge_into_file(detail::tuning_of(runtime).database(), detail::tuning_of(runtime).meta(),
                    tuning_key(p), forced);
    Runtime cached = emulated_runtime(TuningPolicy::cached);
    CHECK(choose_config(detail::tuning_of(cached), p).name() == winner);
  }
}

TEST_CASE("the forward's launch plan: one spec per config, TMA maps on sm_90a, checks first") {
  TempDir cache_dir;
  ScopedEnv cache_env("FLASHJIT_CACHE_DIR", cache_dir.path().c_str());
  ScopedEnv policy_env("FLASHJIT_TUNING", nullptr);
  Attention a;
  a.batch = 2;
  a.heads_q = 4;
  a.heads_kv = 2;
  a.seqlen_q = 300;
  a.seqlen_k = 300;
  a.head_dim = 128;
  // Planning reads addresses, never elements: tensors that are not allocated stand in.
  auto view = [](std::uintptr_t index, DType dtype, std::initializer_list<std::int64_t> shape) {
    return TensorView::contiguous(reinterpret_cast<void*>(index << 32), dtype, shape);
  };
  const TensorView q = view(1, DType::bf16, {2, 300, 4, 128});
  const TensorView k = view(2, DType::bf16, {2, 300, 2, 128});
  const TensorView v = view(3, DType::bf16, {2, 300, 2, 128});
  const TensorView o = view(4, DType::bf16, {2, 300, 4, 128});
  const TensorView lse = view(5, DType::f32, {2, 4, 300});
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CAPTURE(arch);
    Runtime runtime(RuntimeOptions{
        .backend = Backend::emulator, .tuning = TuningPolicy::cached, .emulated_arch = arch});
    const DeviceInfo& device = detail::backend_of(runtime).info();
    kernels::ConfigChoice& choice = detail::tuning_of(runtime);
    auto plan = [&](const Attention& call, const TensorView& out) {
      return kernels::plan_attention_forward(device, choice, call, q, k, v, out, lse, nullptr);
    };
    const std::optional<kernels::ForwardLaunch> first = plan(a, o), second = plan(a, o);
    REQUIRE(first);
    REQUIRE(second);
    // The spec is made once and kept: the second call formats no kernel name.
    CHECK(first->spec == second->spec);
    const auto config =
        choice.choose_as<kernels::ForwardConfig>(kernels::AttentionProblem(false, DType::bf16, a));
    // Three query blocks: the chosen 2-CTA clusters give way to their unclustered twin.
    kernels::ForwardConfig planned = config;
    if (planned.path() == kernels::ForwardPath::tma) planned.tma().cluster = false;
    CHECK(*first->spec == kernels::forward_spec(planned, arch));
    CHECK(first->buffers.size() == 5);
    if (std::string(arch) == "sm_90a") {
      REQUIRE(config.path() == kernels::ForwardPath::tma);
      CHECK(config.cluster());
      CHECK(first->maps.size() == 4);  // q, k, v, o
      CHECK(first->maps[0].global_address == q.data);
      CHECK(first->maps[1].box[1] == 176);  // K's box: Bc rows
      CHECK(first->shape.cluster_x == 1);
      CHECK(first->shape.grid_x == 3 * 4 * 2);
      // Two (256 rows): the clusters run; each CTA loads half of K's and V's rows.
      Attention paired = a;
      paired.seqlen_q = 256;
      const std::optional<kernels::ForwardLaunch> clustered = kernels::plan_attention_forward(
          device, choice, paired, view(6, DType::bf16, {2, 256, 4, 128}), k, v,
          view(7, DType::bf16, {2, 256, 4, 128}), view(8, DType::f32, {2, 4, 256}), nullptr);
      REQUIRE(clustered);
      CHECK(*clustered->spec == kernels::forward_spec(config, arch));
      CHECK(clustered->maps[1].box[1] == 88);
      CHECK(clustered->maps[2].box[1] == 88);
      CHECK(clustered->shape.cluster_x == 2);
      CHECK(clustered->shape.grid_x == 2 * 4 * 2);
    } else {
      CHECK(first->maps.empty());
    }
    // Bad input is named before anything is planned; a call with no query plans nothing.
    TensorView bad_o = o;
    bad_o.data = q.data;
    CHECK_THROWS_WITH_AS(plan(a, bad_o), doctest::Contains("'o'"), InvalidArgument);
    Attention empty = a;
    empty.seqlen_q = 0;
    const TensorView q0 = view(6, DType::bf16, {2, 0, 4, 128});
    const TensorView o0 = view(7, DType::bf16, {2, 0, 4, 128});
    const TensorView lse0 = view(8, DType::f32, {2, 4, 0});
    CHECK_FALSE(
        kernels::plan_attention_forward(device, choice, empty, q0, k, v, o0, lse0, nullptr));
  }
}
