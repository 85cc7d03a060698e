// The backward op on the GPU (label gpu), each gradient checked against the float64 reference
// with the bar of attention/backward_case (at most twice the plain-dtype backward's error):
// the checks of tests/ops/test_attention_backward_emulated.cpp (ragged lengths, causal with
// seqlen_q != seqlen_k, head dims from 8 to 256, GQA, both layouts, windows, softcap, fp16 and
// bf16, both modes: atomic dQ and deterministic with bit-identical reruns), every config that
// fits the device for bf16 head dims 64 and 128;
// real sizes (FlashAttention's benchmark shapes: 16k tokens, head_dim · heads = 2048) with the
// reference on sampled rows; and the gradients of a scalar loss against finite differences.
#include <doctest/doctest.h>

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "attention/check/backward_case.hpp"
#include "gpu/case_sweep.hpp"
#include "support/backward_case_builders.hpp"

namespace flashjit::testing {
namespace {

using reference::Layout;

/// The backward op, as check_sweep sees it.
struct BackwardOp {
  using Case = BackwardCase;
  using Config = kernels::BackwardConfig;
  using Runner = BackwardCaseRunner;
  static Config default_config(const Case& c, const std::string& arch) {
    return kernels::default_backward_config(c.dtype, static_cast<int>(c.problem.head_dim),
                                            kernels::forward_mask_kind(c.attention()),
                                            c.problem.softcap > 0, c.deterministic, arch);
  }
  /// Every dK/dV tile; in the deterministic mode, every dQ tile beside the default dK/dV tile
  /// (the whole product would be hundreds of runs).
  static std::vector<Config> space(const Case& c, const std::string& arch) {
    const Config fallback = default_config(c, arch);
    std::vector<Config> configs;
    for (const Config& config : kernels::backward_configs(c.dtype, fallback.head_dim, fallback.mask,
                                                          fallback.softcap, c.deterministic)) {
      if (!kernels::runs_on(config, arch)) continue;  // the TMA backward: sm_90a only
      if (!c.deterministic || config.key == fallback.key) configs.push_back(config);
    }
    return configs;
  }

  static std::string name(const Config& config) {
    const kernels::BackwardSpecs specs = kernels::backward_specs(config, "sm_90a");
    return specs.dkdv.readable_name + " + " + specs.dq.readable_name;
  }
  /// The forward's default (a case runs it first, for O and LSE) and the config's backward
  /// kernels.
  static std::vector<detail::KernelSpec> specs(const Case& c, const Config& config,
                                               const std::string& arch) {
    std::vector<detail::KernelSpec> specs = {kernels::forward_spec(
        kernels::default_forward_config(c.dtype, static_cast<int>(c.problem.head_dim),
                                        kernels::forward_mask_kind(c.attention()),
                                        c.problem.softcap > 0, arch),
        arch)};
    for (detail::KernelSpec& spec : kernels::backward_specs(config, arch).in_order()) {
      specs.push_back(std::move(spec));
    }
    return specs;
  }
};

/// Runs every case (with the configs `sweep` asks for) and checks each verdict; a run that
/// throws fails with its label and message, and the others still run.
void check_cases(const std::vector<BackwardCase>& cases,
                 ConfigSweep sweep = ConfigSweep::every_config) {
  check_sweep<BackwardOp>(cases, sweep);
}

TEST_CASE("backward on the GPU: ragged lengths") {
  BackwardCase batched = with_layout(make_case(2, 2, 33, 65, 40), Layout::bhsd);
  batched.problem.batch = 3;
  BackwardCase batched_long = make_case(4, 4, 1000, 1000, 128, true);
  batched_long.problem.batch = 2;
  check_cases({make_case(1, 1, 1, 1, 64), make_case(1, 1, 17, 17, 64),
               deterministic(make_case(1, 1, 129, 129, 64)), make_case(1, 1, 1, 129, 64),
               make_case(1, 1, 129, 1, 64), make_case(1, 1, 1000, 1000, 64), batched,
               deterministic(batched_long)});
}

TEST_CASE("backward on the GPU: causal with seqlen_q != seqlen_k") {
  // seqlen_q > seqlen_k leaves the first rows with no visible key: they contribute nothing.
  check_cases({make_case(1, 1, 129, 17, 64, true), make_case(1, 1, 17, 129, 64, true),
               make_case(2, 2, 129, 63, 128, true), make_case(1, 1, 1000, 17, 128, true),
               make_case(1, 1, 17, 1000, 64, true),
               with_dtype(make_case(1, 1, 63, 129, 128, true), DType::f16),
               with_layout(make_case(2, 2, 1, 777, 256, true), Layout::bhsd)});
}

TEST_CASE("backward on the GPU: head dims") { check_cases(head_dim_cases(make_case)); }

TEST_CASE("backward on the GPU: GQA and MQA") {
  check_cases({deterministic(make_case(8, 1, 63, 63, 64)),
               with_layout(make_case(8, 1, 129, 129, 128, true), Layout::bhsd),
               make_case(8, 1, 1000, 1000, 128, true), deterministic(make_case(4, 2, 40, 90, 64)),
               with_dtype(make_case(4, 2, 17, 17, 40, true), DType::f16),
               with_dtype(make_case(16, 2, 300, 300, 256, true), DType::f16)});
}

TEST_CASE("backward on the GPU: windows, softcap and scale") {
  BackwardCase scaled = make_case(1, 1, 65, 65, 64);
  scaled.problem.softmax_scale = 0.5;
  BackwardCase combined = with_layout(with_softcap(windowed(90, 120, 20, 10), 20), Layout::bhsd);
  combined.problem.heads_q = 4;
  combined.problem.heads_kv = 2;
  check_cases({windowed(200, 200, 32, 0), windowed(129, 129, 16, 16),
               deterministic(windowed(129, 63, -1, 8)), windowed(100, 100, 0, 0),
               windowed(2000, 2000, 256, 0, 128), with_softcap(make_case(1, 1, 129, 129, 64), 30),
               deterministic(with_softcap(make_case(2, 2, 70, 70, 128, true), 5)),
               with_dtype(with_softcap(make_case(1, 1, 300, 300, 256, true), 50), DType::f16),
               scaled, combined});
}

// Real sizes: batch · seqlen = 16k tokens, head_dim · heads = 2048. The reference covers
// kSampleRows query rows (dQ) and key rows (dK, dV) of up to three heads each; a key row's
// gradient sums over every query row of its group, whose softmax statistics the reference
// computes in float64 on every core (attention/backward_case), seconds per head at 16k.
constexpr std::int64_t kTokens = 16384;
constexpr std::int64_t kModelWidth = 2048;
constexpr std::int64_t kSampleRows = 64;

BackwardCase real_case(std::int64_t seqlen, std::int64_t head_dim, bool causal) {
  const std::int64_t heads = kModelWidth / head_dim;
  BackwardCase c = make_case(heads, heads, seqlen, seqlen, head_dim, causal);
  c.problem.batch = kTokens / seqlen;
  c.sample_rows = kSampleRows;
  return c;
}

TEST_CASE("backward on the GPU at 4096 tokens (batch 4)") {
  std::vector<BackwardCase> cases;
  for (std::int64_t head_dim : {64, 128, 256}) {
    for (bool causal : {false, true}) cases.push_back(real_case(4096, head_dim, causal));
  }
  BackwardCase bhsd = with_layout(real_case(4096, 64, true), Layout::bhsd);
  BackwardCase softcap = with_softcap(real_case(4096, 128, true), 30);
  BackwardCase gqa = real_case(4096, 128, true);  // 8:1, as Llama 3 70B
  gqa.problem.heads_kv = gqa.problem.heads_q / 8;
  cases.insert(cases.end(), {bhsd, softcap, deterministic(gqa)});
  check_cases(cases, ConfigSweep::default_only);
}

TEST_CASE("backward on the GPU at 8192 and 16384 tokens") {
  BackwardCase f16 = with_dtype(real_case(8192, 128, true), DType::f16);
  BackwardCase sliding = real_case(16384, 128, true);  // a 4096-key sliding window
  sliding.problem.window_left = 4096;
  check_cases(
      {real_case(8192, 128, false), f16, deterministic(real_case(16384, 128, true)), sliding},
      ConfigSweep::default_only);
}

TEST_CASE("backward on the GPU at 4096 tokens: every config of head dims 64 and 128") {
  std::vector<BackwardCase> cases;
  for (std::int64_t head_dim : {64, 128}) {
    for (bool causal : {false, true}) {
      BackwardCase c = make_case(4, 4, 4096, 4096, head_dim, causal);
      c.sample_rows = kSampleRows;
      cases.push_back(c);
    }
  }
  check_cases(cases, ConfigSweep::every_config);
}

// L = Σ w ∘ O through forward and backward against central differences (see
// check_finite_differences for the step and the tolerance): GQA, so dK and dV sum two heads.
TEST_CASE("backward on the GPU: gradients match finite differences of a loss") {
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (std::int64_t head_dim : {8, 64}) {
      for (bool causal : {false, true}) {
        const BackwardCase c = with_dtype(make_case(2, 1, 5, 7, head_dim, causal), dtype);
        INFO(c.name());
        try {
          const FiniteDifferenceVerdict verdict = check_finite_differences(gpu(), c, 4);
          CHECK_MESSAGE(verdict.ok, verdict.report);
        } catch (const std::exception& error) {
          FAIL_CHECK(std::string(error.what()));
        }
      }
    }
  }
}

}  // namespace
}  // namespace flashjit::testing
