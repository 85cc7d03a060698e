// The real forward tile program, compiled for the host, run on the CPU emulator through the
// public Runtime API and checked against the float64 reference (attention/attention_case):
// ragged lengths, causal with seqlen_q != seqlen_k, head dims from 8 to 256, GQA/MQA, both
// layouts, windows, softcap; the default config and, for head dims 64 and 128 in bf16, every
// other config the emulator has. An emulator finding (out-of-bounds access, race) throws.
#include <doctest/doctest.h>

#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/check/attention_case.hpp"
#include "common/builtin_kernels.hpp"
#include "support/emulator_runtime.hpp"
#include "support/forward_case_builders.hpp"

namespace flashjit::testing {
namespace {

using reference::Layout;

/// The configs to run `c` with: the runtime's default (nullopt) and, for bf16 head dims 64 and
/// 128, every other config of the space the emulator was built with.
std::vector<std::optional<kernels::ForwardConfig>> configs_for(const ForwardCase& c) {
  std::vector<std::optional<kernels::ForwardConfig>> configs = {std::nullopt};
  const auto d = static_cast<int>(c.problem.head_dim);
  if (c.dtype != DType::bf16 || (d != 64 && d != 128)) return configs;
  const MaskKind mask = kernels::forward_mask_kind(c.attention());
  for (const kernels::ForwardConfig& config :
       kernels::forward_configs(c.dtype, d, mask, c.problem.softcap > 0)) {
    if (!kernels::runs_on(config, emulator().device().arch())) continue;
    const auto spec = kernels::forward_spec(config, emulator().device().arch());
    if (kernels::emulated::builtin_kernels().find(spec.name_expression) != nullptr) {
      configs.push_back(config);
    }
  }
  return configs;
}

void check_cases(const std::vector<ForwardCase>& cases) {
  for (const ForwardCase& c : cases) {
    const ForwardCaseRunner runner(c);  // inputs and reference once, for every config
    for (const auto& config : configs_for(c)) {
      // Appended, not " " + name: GCC 12 warns -Wrestrict on that at -O3 (a false positive).
      std::string label = c.name();
      label += ' ';
      label += config ? kernels::forward_spec(*config, "sm_80").readable_name : "default";
      INFO(label);
      const ForwardVerdict verdict = runner.run(emulator(), config);
      CHECK_MESSAGE(verdict.ok, verdict.describe());
    }
  }
}

TEST_CASE("forward on the emulator: ragged lengths") {
  std::vector<ForwardCase> cases = {make_case(1, 1, 1, 1, 64), make_case(1, 1, 17, 17, 64),
                                    make_case(2, 2, 63, 63, 64, true),
                                    make_case(1, 1, 129, 129, 64)};
  ForwardCase batched = make_case(2, 2, 33, 65, 32);
  batched.problem.batch = 3;
  batched.layout = Layout::bhsd;
  cases.push_back(batched);
  check_cases(cases);
}

TEST_CASE("forward on the emulator: long sequences") {
  check_cases({make_case(1, 1, 1000, 1000, 64, true), make_case(1, 1, 1000, 129, 64),
               make_case(1, 1, 1, 1000, 64, true), make_case(1, 1, 17, 1000, 128, true)});
}

TEST_CASE("forward on the emulator: causal with seqlen_q != seqlen_k") {
  ForwardCase f16 = make_case(1, 1, 129, 63, 80, true);
  f16.dtype = DType::f16;
  // seqlen_q > seqlen_k leaves the first rows with no visible key: O = 0, LSE = -inf.
  check_cases({make_case(1, 1, 129, 63, 64, true), make_case(1, 1, 63, 129, 64, true),
               make_case(1, 1, 1000, 17, 128, true), make_case(1, 1, 1000, 1, 64, true), f16});
}

TEST_CASE("forward on the emulator: head dims") {
  std::vector<ForwardCase> cases = {
      make_case(2, 2, 129, 129, 8),      make_case(1, 1, 17, 63, 8, true),
      make_case(1, 1, 129, 129, 16),     make_case(1, 1, 129, 129, 40),
      make_case(1, 1, 63, 63, 40, true), make_case(1, 1, 129, 200, 80),
      make_case(1, 1, 65, 65, 96),       make_case(2, 2, 129, 129, 128),
      make_case(1, 1, 63, 63, 256),      make_case(1, 1, 129, 129, 256, true)};
  cases[4].layout = Layout::bhsd;
  ForwardCase f16_128 = make_case(1, 1, 100, 100, 128, true);
  f16_128.dtype = DType::f16;
  f16_128.layout = Layout::bhsd;
  ForwardCase f16_256 = make_case(1, 1, 17, 33, 256);
  f16_256.dtype = DType::f16;
  ForwardCase f16_8 = make_case(1, 1, 70, 70, 8, true);
  f16_8.dtype = DType::f16;
  cases.insert(cases.end(), {f16_128, f16_256, f16_8});
  check_cases(cases);
}

TEST_CASE("forward on the emulator: GQA and MQA") {
  ForwardCase gqa_bhsd = make_case(8, 1, 129, 129, 128, true);
  gqa_bhsd.layout = Layout::bhsd;
  check_cases({make_case(8, 1, 63, 63, 64), gqa_bhsd, make_case(4, 2, 40, 90, 64),
               make_case(6, 3, 17, 17, 40, true)});
}

TEST_CASE("forward on the emulator: windows, softcap and scale") {
  ForwardCase sliding = windowed(200, 200, 32, 0);
  ForwardCase softcap = make_case(1, 1, 129, 129, 64);
  softcap.problem.softcap = 30;
  ForwardCase softcap_causal = make_case(2, 2, 70, 70, 128, true);
  softcap_causal.problem.softcap = 5;
  ForwardCase scaled = make_case(1, 1, 65, 65, 64);
  scaled.problem.softmax_scale = 0.5;
  ForwardCase combined = windowed(90, 120, 20, 10);
  combined.problem.heads_q = 4;
  combined.problem.heads_kv = 2;
  combined.problem.softcap = 20;
  combined.layout = Layout::bhsd;
  ForwardCase no_lse = make_case(1, 1, 40, 40, 64, true);
  no_lse.write_lse = false;
  check_cases({sliding, windowed(129, 129, 16, 16), windowed(129, 129, 64, -1),
               windowed(129, 63, -1, 8), windowed(100, 100, 0, 0), windowed(50, 50, 500, 500, 128),
               softcap, softcap_causal, scaled, combined, no_lse,
               // Whole key blocks no query sees (chunked prefill with a sliding window), as
               // the backward suite runs them.
               windowed(128, 512, 256, 0), windowed(1, 65, 0, 0, 128)});
}

// The GPU suite judges real sizes on sampled rows; here, where the full reference is cheap, the
// sampled verdict must agree with it (every row sampled) and still pass with a few rows.
TEST_CASE("forward on the emulator: a sampled reference judges like the full one") {
  ForwardCase full = make_case(3, 3, 129, 100, 64, true);  // 3 heads: the sample takes all
  ForwardCase sampled = full;
  sampled.sample_rows = full.problem.seqlen_q;
  const ForwardVerdict a = ForwardCaseRunner(full).run(emulator());
  const ForwardVerdict b = ForwardCaseRunner(sampled).run(emulator());
  CHECK(a.ok);
  CHECK(b.ok);
  // The same rows summed in another order: equal up to rounding.
  CHECK(a.error == doctest::Approx(b.error).epsilon(1e-9));
  CHECK(a.plain_error == doctest::Approx(b.plain_error).epsilon(1e-9));
  sampled.sample_rows = 7;
  CHECK(ForwardCaseRunner(sampled).run(emulator()).ok);
}

}  // namespace
}  // namespace flashjit::testing

namespace flashjit::testing {

TEST_CASE("forward on an emulated sm_90a: the TMA path by default from head dim 64") {
  Runtime& runtime = hopper_emulator();
  REQUIRE(runtime.device().arch() == "sm_90a");
  ForwardCase gqa_bhsd = make_case(8, 1, 100, 150, 128, true);
  gqa_bhsd.layout = reference::Layout::bhsd;
  ForwardCase f16 = make_case(2, 2, 129, 63, 64, true);
  f16.dtype = DType::f16;
  ForwardCase softcap = make_case(1, 1, 65, 65, 128);
  softcap.problem.softcap = 30.0;
  const std::vector<ForwardCase> cases = {make_case(2, 2, 129, 129, 64),
                                          make_case(1, 1, 1, 1, 64),
                                          make_case(1, 1, 17, 200, 120, true),
                                          make_case(1, 1, 65, 65, 96),
                                          gqa_bhsd,
                                          f16,
                                          softcap,
                                          windowed(200, 200, 40, 10)};
  for (const ForwardCase& c : cases) {
    INFO(c.name());
    const kernels::ForwardConfig config = kernels::default_forward_config(
        c.dtype, static_cast<int>(c.problem.head_dim), kernels::forward_mask_kind(c.attention()),
        c.problem.softcap > 0, "sm_90a");
    CHECK(config.path() == kernels::ForwardPath::tma);
    const ForwardVerdict verdict = run_forward_case(runtime, c);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
  }
  // Below head dim 64 the mma.sync path runs there.
  const ForwardVerdict d40 = run_forward_case(runtime, make_case(1, 1, 65, 65, 40));
  CHECK_MESSAGE(d40.ok, d40.describe());
}

TEST_CASE("forward on an emulated sm_90a: each CTA reads its Q rows and every K and V row once") {
  Runtime& runtime = hopper_emulator();
  runtime.reset_emulated_work();
  // Three tiles of Br = 128 on three persistent CTAs (fewer tiles than SMs), the last with 64
  // rows: its second warpgroup has no query row, computes on the zero rows TMA filled in (the
  // persistent kernel does not branch around it) and stores nothing.
  const ForwardCase c = make_case(1, 1, 320, 320, 64);
  const ForwardVerdict verdict = run_forward_case(runtime, c);
  REQUIRE_MESSAGE(verdict.ok, verdict.describe());
  const std::vector<KernelWork> work = runtime.emulated_work();
  REQUIRE(work.size() == 1);
  CHECK(work.front().kernel ==
        "attention_forward.hdim64.bf16.br128.bc128.w12.s2.tma.overlap.pingpong.persistent.sm90a");
  constexpr std::uint64_t kRowBytes = 64 * 2;
  CHECK(work.front().work.ctas == 3);
  CHECK(work.front().work.global_bytes_read == 320 * kRowBytes + 3 * (2 * 320 * kRowBytes));
  CHECK(work.front().work.global_bytes_written == 320 * kRowBytes + 320 * 4);  // O and LSE
  // Every query row once and the idle warpgroup's 64, each against the 384 keys of three whole
  // Bc = 128 blocks (the last one's 64 past seqlen_k are TMA's zeros).
  CHECK(work.front().work.tensor_flops == 4ull * (320 + 64) * 384 * 64);
  CHECK(work.front().work.ldmatrix_bytes == 0);  // no operand goes through ldmatrix
}

TEST_CASE("forward on an emulated sm_90a: from head dim 128 two CTAs share K and V") {
  Runtime& runtime = hopper_emulator();
  // Two query blocks of Br = 128: one cluster, which reads each K and V row once.
  runtime.reset_emulated_work();
  const ForwardCase even = make_case(1, 1, 256, 300, 128);
  ForwardVerdict verdict = run_forward_case(runtime, even);
  REQUIRE_MESSAGE(verdict.ok, verdict.describe());
  std::vector<KernelWork> work = runtime.emulated_work();
  REQUIRE(work.size() == 1);
  CHECK(work.front().kernel ==
        "attention_forward.hdim128.bf16.br128.bc176.w12.s2.tma.overlap.pingpong.cluster2.sm90a");
  constexpr std::uint64_t kRowBytes = 128 * 2;
  CHECK(work.front().work.ctas == 2);
  CHECK(work.front().work.global_bytes_read == 256 * kRowBytes + 2 * 300 * kRowBytes);
  // Three: the unclustered twin, as FlashAttention-3 has it (a third CTA would only load).
  runtime.reset_emulated_work();
  verdict = run_forward_case(runtime, make_case(2, 1, 300, 300, 128));
  REQUIRE_MESSAGE(verdict.ok, verdict.describe());
  work = runtime.emulated_work();
  REQUIRE(work.size() == 1);
  CHECK(work.front().kernel ==
        "attention_forward.hdim128.bf16.br128.bc176.w12.s2.tma.overlap.pingpong.sm90a");
  // Asked for, the clusters take an odd count too: the last cluster's second CTA has no row.
  const kernels::ForwardConfig clustered =
      kernels::default_forward_config(DType::bf16, 128, MaskKind::none, false, "sm_90a");
  REQUIRE(clustered.cluster());
  runtime.reset_emulated_work();
  verdict = run_forward_case(runtime, make_case(2, 1, 300, 300, 128), clustered);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  work = runtime.emulated_work();
  REQUIRE(work.size() == 1);
  CHECK(work.front().work.ctas == 2 * 4);  // 3 query blocks, 4 CTAs, for each of 2 heads
}

}  // namespace flashjit::testing
