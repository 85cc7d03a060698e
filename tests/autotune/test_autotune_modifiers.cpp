// The autotuner with score and mask modifiers (Attention::score_mod, mask_mod): their digest in
// the key and the memo, a space of the kernels that take them with the modifiers compiled into
// every candidate, and tuning end to end on the emulator (the candidates compiled for the host):
// a forward reading a captured table, stored under its key and then run by a cached Runtime; a
// backward with a learnable capture, whose gradient the tuning adds into buffers of its own.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/attention_tuning.hpp"
#include "attention/modifiers/score_modifiers.hpp"
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

constexpr const char* kBias = "score + bias[h]";  // a per-head bias, read from a capture

kernels::AttentionProblem problem(bool backward, std::int64_t seqlen, std::string score_mod) {
  Attention a{.batch = 1, .heads_q = 2, .heads_kv = 2, .seqlen_q = seqlen, .seqlen_k = seqlen};
  a.score_mod = std::move(score_mod);
  return kernels::AttentionProblem(backward, DType::bf16, a);
}

Runtime emulated_runtime() {
  return Runtime(RuntimeOptions{.backend = Backend::emulator, .tuning = TuningPolicy::cached});
}

/// `values` in `runtime`'s memory.
DeviceBuffer upload(Runtime& runtime, const std::vector<float>& values) {
  DeviceBuffer buffer = runtime.allocate(values.size() * 4);
  runtime.copy_to_device(buffer.data(), values.data(), values.size() * 4);
  return buffer;
}

/// A tuning on the emulator with a database of its own, and kBias's table in its memory.
struct BiasTuning {
  TempDir cache_dir;
  ScopedEnv cache_env{"FLASHJIT_CACHE_DIR", cache_dir.path().c_str()};
  ScopedEnv policy_env{"FLASHJIT_TUNING", nullptr};
  Runtime runtime = emulated_runtime();
  DeviceBuffer table = upload(runtime, {0.25f, -0.5f});

  TensorView bias() const { return TensorView::contiguous(table.data(), DType::f32, {2}); }
};

TuneOptions quick_tuning(std::vector<std::string> only) {
  TuneOptions options;
  options.jobs = 2;
  options.timing = {.warmup_runs = 1, .min_runs = 2, .max_runs = 2, .budget_ms = 1};
  options.only = std::move(only);
  return options;
}

}  // namespace

TEST_CASE("modifiers in the key: their digest and the forward's block mask, the memo too") {
  const kernels::AttentionProblem plain = problem(false, 1000, "");
  const kernels::AttentionProblem alibi = problem(false, 1000, "score - 0.5f * (q_idx - kv_idx)");
  CHECK(plain.key() == "bf16/hdim64/none/q1024/k1024/bh2");
  CHECK(alibi.key() == plain.key() + "/mod" + kernels::score_modifiers(alibi.attention).digest());
  CHECK(TuningState::shape_class(alibi) != TuningState::shape_class(plain));
  const kernels::AttentionProblem other = problem(false, 1000, "score - 0.25f * (q_idx - kv_idx)");
  CHECK(other.key() != alibi.key());
  CHECK(TuningState::shape_class(other) != TuningState::shape_class(alibi));
  kernels::AttentionProblem masked = alibi;
  masked.attention.mask_mod = "kv_idx != 3";
  CHECK(masked.key() != alibi.key());
  CHECK(masked.describe().find("modifiers") != std::string::npos);

  // A capture's name and type are part of the digest; its data is not.
  float table[2] = {};
  float elsewhere[2] = {};
  kernels::AttentionProblem captured = problem(false, 1000, kBias);
  captured.attention.captures = {{"bias", TensorView::contiguous(table, DType::f32, {2})}};
  kernels::AttentionProblem moved = captured;
  moved.attention.captures[0].tensor.data = elsewhere;
  CHECK(moved.key() == captured.key());
  CHECK(TuningState::shape_class(moved) == TuningState::shape_class(captured));
  moved.attention.captures[0].tensor.dtype = DType::bf16;
  CHECK(moved.key() != captured.key());

  std::int32_t entries[4] = {};
  kernels::AttentionProblem blocked = masked;
  blocked.attention.block_mask = TensorView::contiguous(entries, DType::i32, {1, 2, 63, 4});
  CHECK(blocked.key() == masked.key() + ".blockmask");
  CHECK(TuningState::shape_class(blocked) != TuningState::shape_class(masked));
  blocked.backward = masked.backward = true;  // the backward reads no block mask
  CHECK(blocked.key() == masked.key());
}

TEST_CASE("modifiers' candidates: the kernels that take them, compiled in, and their default") {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (bool backward : {false, true}) {
      INFO(arch << (backward ? " backward" : " forward"));
      const kernels::AttentionProblem p = problem(backward, 4096, "score * 0.5f");
      const std::string type = kernels::score_modifiers(p.attention).type_name();
      const std::vector<Candidate> candidates = enumerate_candidates(p, arch);
      REQUIRE(candidates.size() > 1);
      int defaults = 0;
      for (const Candidate& c : candidates) {
        CHECK_MESSAGE(p.cannot_run(c.config).empty(), c.name);
        const bool compiled_in =
            std::any_of(c.specs.begin(), c.specs.end(), [&](const detail::KernelSpec& spec) {
              return spec.name_expression.find(type) != std::string::npos &&
                     spec.main_source().find("score * 0.5f") != std::string::npos;
            });
        CHECK_MESSAGE(compiled_in, c.name);
        defaults += c.is_default;
      }
      CHECK(defaults == 1);
      const TunedConfig fallback = p.default_config(arch);
      if (backward) {
        CHECK(fallback.get<kernels::BackwardConfig>() ==
              kernels::modifiers_backward_config(DType::bf16, p.attention, arch));
      } else {
        CHECK(fallback.get<kernels::ForwardConfig>() ==
              kernels::dense_modifiers_forward_config(DType::bf16, p.attention, arch));
      }
    }
  }
  // On sm_90a the plain space has the wgmma forward, which takes no modifiers; the modified one
  // not. Both TMA kernels take them.
  const auto has = [](const std::vector<Candidate>& candidates, const std::string& mark) {
    return std::any_of(candidates.begin(), candidates.end(),
                       [&](const Candidate& c) { return c.name.find(mark) != std::string::npos; });
  };
  CHECK(has(enumerate_candidates(problem(false, 4096, ""), "sm_90a"), ".wgmma"));
  CHECK_FALSE(has(enumerate_candidates(problem(false, 4096, "score * 0.5f"), "sm_90a"), ".wgmma"));
  CHECK(has(enumerate_candidates(problem(false, 4096, "score * 0.5f"), "sm_90a"), ".tma"));
  CHECK(has(enumerate_candidates(problem(true, 4096, "score * 0.5f"), "sm_90a"), ".tma"));
  const kernels::AttentionProblem modified = problem(false, 4096, "score * 0.5f");
  kernels::ForwardConfig wgmma{DType::bf16, 64, 128, 128, 8, 1, MaskKind::none, false};
  wgmma.options = kernels::WgmmaOptions{};
  CHECK(modified.cannot_run(TunedConfig(wgmma)).find("wgmma") != std::string::npos);
}

TEST_CASE("tuning a forward with modifiers on the emulator: stored under their key, then run") {
  BiasTuning tuning;
  Runtime& runtime = tuning.runtime;
  kernels::AttentionProblem p = problem(false, 64, kBias);
  p.attention.captures = {{"bias", tuning.bias()}};
  const std::string fallback = p.default_config("sm_80").name();
  const std::string other = fallback == "br64.bc32.w4.s1" ? "br64.bc64.w4.s1" : "br64.bc32.w4.s1";
  const TuneReport report = tune(detail::tuning_of(runtime), p, quick_tuning({other}));
  REQUIRE(report.timings.size() == 2);  // the default and `other`, each compiled with the bias
  for (const CandidateTiming& t : report.timings) CHECK_MESSAGE(t.status == "ok", t.status);
  CHECK(report.key.to_string().find("/mod") != std::string::npos);

  // The entry, made to name `other`, is what a cached Runtime's forward of the call runs.
  TuningEntry forced = report.entry;
  for (CandidateTiming& t : forced.candidates) t.median_ms = t.config == other ? 1.0 : 2.0;
  merge_into_file(detail::tuning_of(runtime).database(), detail::tuning_of(runtime).meta(),
                  report.key, forced);
  Runtime cached = emulated_runtime();
  CHECK(choose_config(detail::tuning_of(cached), p).name() == other);
  Attention a = p.attention;
  const DeviceBuffer cached_table = upload(cached, {0.25f, -0.5f});
  a.captures[0].tensor.data = cached_table.data();
  const DeviceBuffer x = upload(cached, std::vector<float>(64 * 2 * 64 / 2, 0.0f));
  const TensorView t = attention_tensor(x.data(), DType::bf16, Layout::bshd, 1, 64, 2, 64);
  DeviceBuffer o = cached.allocate(64 * 2 * 64 * 2);
  cached.reset_emulated_work();
  cached.forward(a, t, t, t, attention_tensor(o.data(), DType::bf16, Layout::bshd, 1, 64, 2, 64),
                 lse_tensor(nullptr, a));
  REQUIRE(cached.emulated_work().size() == 1);
  const std::string kernel = cached.emulated_work().front().kernel;
  CHECK_MESSAGE(kernel.find(other.substr(0, other.find(".s"))) != std::string::npos, kernel);
  CHECK_MESSAGE(kernel.find(".mod") != std::string::npos, kernel);
}

TEST_CASE("tuning a backward with a learnable capture leaves the caller's gradient alone") {
  BiasTuning tuning;
  Runtime& runtime = tuning.runtime;
  const DeviceBuffer grad = upload(runtime, {7.0f, 7.0f});
  kernels::AttentionProblem p = problem(true, 64, kBias);
  p.attention.captures = {
      {"bias", tuning.bias(), TensorView::contiguous(grad.data(), DType::f32, {2})}};
  const TuneReport report = tune(detail::tuning_of(runtime), p, quick_tuning({"(default only)"}));
  REQUIRE(report.timings.size() == 1);
  CHECK_MESSAGE(report.timings.front().status == "ok", report.timings.front().status);
  std::vector<float> after(2);
  runtime.copy_to_host(after.data(), grad.data(), 8);
  CHECK(after == std::vector<float>{7.0f, 7.0f});
}
