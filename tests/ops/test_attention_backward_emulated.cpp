// The real backward tile programs (D, dQ, dK/dV), compiled for the host, run on the CPU
// emulator through the public Runtime API after the library's own forward, and each gradient
// checked against the float64 reference (attention/backward_case): ragged lengths, causal
// with seqlen_q != seqlen_k both ways, head dims from 8 to 256, GQA 8:1 and 4:2, both layouts,
// windows, softcap, fp16 and bf16; both modes (dQ summed atomically by the dK/dV kernel, and
// the deterministic mode's own dQ kernel); the default config and, for head dims 64 and 128 in
// bf16, every other config the emulator has; bit-identical gradients across runs of the
// deterministic mode; and gradients against finite differences of a loss. An emulator finding
// (out-of-bounds access, race) throws, so a pass also means none.
#include <doctest/doctest.h>

#include <optional>
#include <vector>

#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "attention/check/backward_case.hpp"
#include "common/builtin_kernels.hpp"
#include "support/backward_case_builders.hpp"

namespace flashjit::testing {
namespace {

using reference::Layout;

Runtime& emulator() {
  static Runtime runtime(RuntimeOptions{.backend = Backend::emulator});
  return runtime;
}

/// The configs to run `c` with: the runtime's default (nullopt) and, for bf16 head dims 64 and
/// 128, every other config of the space the emulator was built with.
std::vector<std::optional<kernels::BackwardConfig>> configs_for(const BackwardCase& c) {
  std::vector<std::optional<kernels::BackwardConfig>> configs = {std::nullopt};
  const auto d = static_cast<int>(c.problem.head_dim);
  if (c.dtype != DType::bf16 || (d != 64 && d != 128)) return configs;
  const MaskKind mask = kernels::forward_mask_kind(c.attention());
  const bool softcap = c.problem.softcap > 0;
  const std::string arch = emulator().device().arch();
  const kernels::BackwardConfig chosen =
      kernels::default_backward_config(c.dtype, d, mask, softcap, c.deterministic, arch);
  const auto built = [](const detail::KernelSpec& spec) {
    return kernels::emulated::builtin_kernels().find(spec.name_expression) != nullptr;
  };
  for (const kernels::BackwardConfig& config :
       kernels::backward_configs(c.dtype, d, mask, softcap, c.deterministic)) {
    if (!kernels::runs_on(config, arch)) continue;  // the TMA backward: its own tests
    const kernels::BackwardSpecs specs = kernels::backward_specs(config, arch);
    if (config != chosen && built(specs.dkdv) && built(specs.dq)) configs.push_back(config);
  }
  return configs;
}

void check_cases(const std::vector<BackwardCase>& cases) {
  for (const BackwardCase& c : cases) {
    const BackwardCaseRunner runner(c);  // inputs and reference once, for every config
    for (const auto& config : configs_for(c)) {
      INFO(c.name() << " "
                    << (config ? kernels::backward_specs(*config, "sm_80").dkdv.readable_name
                               : std::string("default")));
      const BackwardVerdict verdict = runner.run(emulator(), config);
      CHECK_MESSAGE(verdict.ok, verdict.describe());
    }
  }
}

TEST_CASE("backward on the emulator: ragged lengths") {
  BackwardCase batched = with_layout(make_case(2, 2, 33, 65, 40), Layout::bhsd);
  batched.problem.batch = 3;
  // One key: P = 1, so dS = dP − D = 0 and the exact dQ and dK are 0.
  check_cases({make_case(1, 1, 1, 1, 64), make_case(1, 1, 17, 17, 64),
               deterministic(make_case(1, 1, 129, 129, 64)), make_case(1, 1, 1, 129, 64),
               make_case(1, 1, 129, 1, 64), with_dtype(make_case(1, 1, 17, 1, 128), DType::f16),
               batched});
}

TEST_CASE("backward on the emulator: long sequences") {
  // Many blocks each way: the dQ kernel's K/V pipeline and the dK/dV kernel's query loop.
  check_cases({deterministic(make_case(1, 1, 1000, 1000, 64, true)),
               make_case(1, 1, 1000, 129, 128), make_case(1, 1, 17, 1000, 128, true),
               with_dtype(make_case(1, 1, 1000, 17, 64, true), DType::f16)});
}

TEST_CASE("backward on the emulator: causal with seqlen_q != seqlen_k") {
  // seqlen_q > seqlen_k leaves the first rows with no visible key: they contribute nothing.
  check_cases({make_case(1, 1, 129, 17, 64, true), make_case(1, 1, 17, 129, 64, true),
               deterministic(make_case(2, 2, 129, 63, 128, true)),
               with_dtype(make_case(1, 1, 63, 129, 128, true), DType::f16),
               with_layout(make_case(1, 1, 1, 129, 256, true), Layout::bhsd)});
}

TEST_CASE("backward on the emulator: head dims 8 and 40") {
  check_cases(
      {make_case(2, 2, 129, 129, 8), with_dtype(make_case(1, 1, 17, 63, 8, true), DType::f16),
       make_case(1, 1, 129, 129, 40),
       with_layout(with_dtype(make_case(1, 1, 63, 63, 40, true), DType::f16), Layout::bhsd)});
}

TEST_CASE("backward on the emulator: head dims 128 and 256") {
  check_cases(
      {make_case(1, 1, 129, 129, 128),
       with_layout(with_dtype(make_case(1, 1, 100, 100, 128, true), DType::f16), Layout::bhsd),
       make_case(1, 1, 63, 63, 256), deterministic(make_case(1, 1, 129, 129, 256, true)),
       with_dtype(make_case(1, 1, 17, 33, 256), DType::f16)});
}

TEST_CASE("backward on the emulator: GQA") {
  // dK and dV sum the query heads sharing a key head: 8:1 (MQA) and 4:2.
  check_cases({deterministic(make_case(8, 1, 63, 63, 64)),
               with_layout(make_case(8, 1, 129, 129, 128, true), Layout::bhsd),
               deterministic(make_case(4, 2, 40, 90, 64)),
               with_dtype(make_case(4, 2, 17, 17, 40, true), DType::f16)});
}

TEST_CASE("backward on the emulator: windows") {
  check_cases({windowed(200, 200, 32, 0), windowed(129, 129, 16, 16),
               deterministic(windowed(129, 63, -1, 8)), windowed(100, 100, 0, 0),
               with_dtype(windowed(65, 65, 8, 40, 128), DType::f16)});
}

TEST_CASE("backward on the emulator: windows that hide whole key blocks") {
  // Key blocks that no query sees (seqlen_k - seqlen_q - window_left >= the key block): their
  // dK and dV are exactly zero and the CTA that owns them must finish its loads before it
  // stages them (an emulator finding otherwise).
  std::vector<BackwardCase> cases;
  for (std::int64_t d : {64, 128, 256}) {
    for (DType dtype : {DType::bf16, DType::f16}) {
      cases.push_back(with_dtype(windowed(128, 512, 256, 0, d), dtype));
      cases.push_back(with_dtype(windowed(1, 65, 0, 0, d), dtype));
    }
  }
  check_cases(cases);
}

TEST_CASE("backward on the emulator: softcap and scale") {
  BackwardCase scaled = make_case(1, 1, 65, 65, 64);
  scaled.problem.softmax_scale = 0.5;
  BackwardCase combined = with_layout(with_softcap(windowed(90, 120, 20, 10), 20), Layout::bhsd);
  combined.problem.heads_q = 4;
  combined.problem.heads_kv = 2;
  check_cases({with_softcap(make_case(1, 1, 129, 129, 64), 30),
               deterministic(with_softcap(make_case(2, 2, 70, 70, 128, true), 5)), scaled,
               combined});
}

// The GPU suite judges real sizes on sampled rows; here, where the full reference is cheap, the
// sampled verdict must agree with it (every row sampled) and still pass with a few rows.
TEST_CASE("backward on the emulator: a sampled reference judges like the full one") {
  BackwardCase full = make_case(3, 1, 70, 50, 64, true);  // 3 heads and 1: the sample takes all
  BackwardCase sampled = full;
  sampled.sample_rows = std::max(full.problem.seqlen_q, full.problem.seqlen_k);
  const BackwardVerdict a = BackwardCaseRunner(full).run(emulator());
  const BackwardVerdict b = BackwardCaseRunner(sampled).run(emulator());
  CHECK_MESSAGE(a.ok, a.describe());
  CHECK_MESSAGE(b.ok, b.describe());
  // The same elements summed in another order: equal up to rounding.
  for (const auto& [x, y] : {std::pair{a.dq, b.dq}, {a.dk, b.dk}, {a.dv, b.dv}}) {
    CHECK(x.error == doctest::Approx(y.error).epsilon(1e-9));
    CHECK(x.plain_error == doctest::Approx(y.plain_error).epsilon(1e-9));
  }
  sampled.sample_rows = 7;
  const BackwardVerdict few = BackwardCaseRunner(sampled).run(emulator());
  CHECK_MESSAGE(few.ok, few.describe());
}

TEST_CASE("backward on the emulator: the plain baseline is what it claims") {
  // One key and one query: every rounding in the plain backward is exact (P = 1, dS = 0,
  // dV = dO), so its error is 0; more keys make it of the order of the dtype's precision.
  const PlainBackwardErrors exact = plain_backward_errors(make_case(1, 1, 1, 1, 64));
  CHECK(exact.dq == 0);
  CHECK(exact.dk == 0);
  CHECK(exact.dv == 0);
  const PlainBackwardErrors bf16 = plain_backward_errors(make_case(1, 1, 65, 65, 64));
  const PlainBackwardErrors f16 =
      plain_backward_errors(with_dtype(make_case(1, 1, 65, 65, 64), DType::f16));
  for (double error : {bf16.dq, bf16.dk, bf16.dv}) CHECK((error > 1e-3 && error < 5e-2));
  for (double error : {f16.dq, f16.dk, f16.dv}) CHECK((error > 1e-4 && error < 1e-2));
}

TEST_CASE("backward on the emulator: gradients match finite differences of a loss") {
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (bool causal : {false, true}) {
      for (bool deterministic : {false, true}) {
        // GQA 2:1, so dK and dV sum two heads.
        BackwardCase c = with_dtype(make_case(2, 1, 5, 7, 8, causal), dtype);
        c.deterministic = deterministic;
        INFO(c.name());
        const FiniteDifferenceVerdict verdict = check_finite_differences(emulator(), c, 4);
        CHECK_MESSAGE(verdict.ok, verdict.report);
      }
    }
  }
}

}  // namespace
}  // namespace flashjit::testing
