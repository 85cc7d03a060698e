// A value head dim other than the query/key head dim (Attention::head_dim_v; DeepSeek's MLA
// prefill: 192 and 128) on the CPU emulator, against the float64 reference: the forward on
// sm_80's mma.sync kernel and sm_90a's TMA kernel, the backward on sm_80's mma.sync kernels and
// sm_90a's TMA backward, both dQ modes; the tuning key that keeps its choices apart. (The wgmma
// forward's case is in test_attention_forward_wgmma_emulated; the argument checks in the
// arguments suites.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "attention/attention_tuning.hpp"
#include "attention/check/attention_case.hpp"
#include "attention/check/backward_case.hpp"
#include "attention/check/inference_case.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

/// MLA's prefill shape, small: 4 query heads over `heads_kv`, 130 queries over 200 keys.
reference::Problem mla_problem(std::int64_t heads_kv, bool causal) {
  reference::Problem p;
  p.heads_q = 4;
  p.heads_kv = heads_kv;
  p.seqlen_q = 130;
  p.seqlen_k = 200;
  p.head_dim = 192;
  p.head_dim_v = 128;
  p.causal = causal;
  return p;
}

/// Whether a kernel whose name contains `part` ran since the runtime's work was last reset.
bool ran(Runtime& runtime, const std::string& part) {
  const std::vector<KernelWork> work = runtime.emulated_work();
  return std::any_of(work.begin(), work.end(), [&](const KernelWork& kernel) {
    return kernel.kernel.find(part) != std::string::npos;
  });
}

}  // namespace

TEST_CASE("value head dim 128 of 192: the forward on sm_80 and on sm_90a's TMA kernel") {
  for (Runtime* runtime : {&emulator(), &hopper_emulator()}) {
    for (bool causal : {false, true}) {
      ForwardCase c;
      c.problem = mla_problem(/*heads_kv=*/2, causal);
      c.layout = causal ? reference::Layout::bhsd : reference::Layout::bshd;
      runtime->reset_emulated_work();
      const ForwardVerdict verdict = run_forward_case(*runtime, c);
      CHECK_MESSAGE(verdict.ok, c.name() << ": " << verdict.describe());
      if (runtime == &hopper_emulator()) CHECK(ran(*runtime, ".tma"));
    }
  }
}

TEST_CASE("value head dim 128 of 192: the backward, both dQ modes, on sm_80 and sm_90a") {
  for (Runtime* runtime : {&emulator(), &hopper_emulator()}) {
    for (bool deterministic : {false, true}) {
      BackwardCase c;
      c.problem = mla_problem(/*heads_kv=*/deterministic ? 4 : 1, /*causal=*/!deterministic);
      c.deterministic = deterministic;
      runtime->reset_emulated_work();
      const BackwardVerdict verdict = run_backward_case(*runtime, c);
      CHECK_MESSAGE(verdict.ok, c.name() << ": " << verdict.describe());
      if (runtime == &hopper_emulator()) CHECK(ran(*runtime, ".tma"));
    }
  }
}

TEST_CASE("value head dim: its own tuning key, and head_dim_v = head_dim the plain problem's") {
  Attention a;
  a.seqlen_q = a.seqlen_k = 64;
  a.head_dim = 192;
  a.head_dim_v = 128;
  const kernels::AttentionProblem mla(false, DType::bf16, a);
  CHECK(mla.key().find("/hdim192v128/") != std::string::npos);
  Attention same = a;
  same.head_dim_v = 192;
  Attention plain = a;
  plain.head_dim_v = 0;
  const kernels::AttentionProblem spelled(false, DType::bf16, same),
      unset(false, DType::bf16, plain);
  CHECK(spelled.key() == unset.key());
  CHECK(spelled.shape_fields() == unset.shape_fields());
  CHECK(mla.shape_fields() != unset.shape_fields());
  // S = Q Kᵀ counts head_dim, O = P V the value head dim: 2 · pairs · (192 + 128).
  CHECK(mla.flops() == doctest::Approx(2.0 * 64 * 64 * (192 + 128)));
}

}  // namespace flashjit::testing

namespace flashjit::testing {

TEST_CASE("value head dim with Sequences: packed prefill, paged split decoding, varlen backward") {
  InferenceCase prefill = random_lengths_case(4, 150, 150, /*seed=*/3);
  prefill.keys = KeyStorage::packed;
  prefill.heads_q = 4;
  prefill.heads_kv = 2;
  prefill.head_dim = 192;
  prefill.head_dim_v = 128;
  prefill.causal = true;
  for (Runtime* runtime : {&emulator(), &hopper_emulator()}) {  // mma.sync, then TMA
    runtime->reset_emulated_work();
    const InferenceVerdict verdict = run_inference_case(*runtime, prefill);
    CHECK_MESSAGE(verdict.ok, prefill.name() << ": " << verdict.first_failure);
    if (runtime == &hopper_emulator()) CHECK(ran(*runtime, ".tma"));
  }
  InferenceCase decode;
  decode.seqlens_q = {1, 1, 1};
  decode.seqlens_k = {300, 17, 129};
  decode.keys = KeyStorage::paged;
  decode.page_size = 8;
  decode.heads_q = 8;
  decode.heads_kv = 2;
  decode.head_dim = 128;
  decode.head_dim_v = 64;
  decode.splits = 3;  // the partials and their merge are 64 wide
  const InferenceVerdict decoded = run_inference_case(emulator(), decode);
  CHECK_MESSAGE(decoded.ok, decode.name() << ": " << decoded.first_failure);
  // The backward over packed sequences; on sm_90a the mma.sync kernels (the TMA backward's
  // packed form writes dV head_dim wide).
  InferenceCase backward = prefill;
  backward.seqlens_q = {40, 0, 1, 77};
  backward.seqlens_k = {40, 0, 1, 77};
  backward.packed_q = true;
  for (Runtime* runtime : {&emulator(), &hopper_emulator()}) {
    runtime->reset_emulated_work();
    const InferenceVerdict verdict = run_inference_backward_case(*runtime, backward);
    CHECK_MESSAGE(verdict.ok, backward.name() << ": " << verdict.first_failure);
    CHECK(ran(*runtime, "attention_backward.dkdv."));
    for (const KernelWork& kernel : runtime->emulated_work()) {
      CHECK_FALSE((kernel.kernel.starts_with("attention_backward.dkdv.") &&
                   kernel.kernel.find(".tma") != std::string::npos));
    }
  }
}

}  // namespace flashjit::testing
