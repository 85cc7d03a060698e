// GPU tests (label `gpu`): merge_states on real hardware, the emulated suite's invariant
// ("split + merge equals unsplit") at larger sizes, both forms, every dtype pair.
#include <doctest/doctest.h>

#include "flashjit/flashjit.hpp"
#include "merge_states/merge_states_case.hpp"

using namespace flashjit;
using flashjit::testing::MergeStatesCase;

namespace {

reference::Problem problem(std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t head_dim) {
  return {.batch = 2,
          .heads_q = 8,
          .heads_kv = 2,
          .seqlen_q = seqlen_q,
          .seqlen_k = seqlen_k,
          .head_dim = head_dim,
          .causal = true};
}

}  // namespace

TEST_CASE("merge_states on the GPU equals the unsplit float64 result") {
  Runtime runtime;
  const DType pairs[][2] = {{DType::f32, DType::f32},
                            {DType::f32, DType::bf16},
                            {DType::f32, DType::f16},
                            {DType::bf16, DType::bf16},
                            {DType::f16, DType::f32}};
  for (const auto& pair : pairs) {
    for (std::int64_t head_dim : {64, 128, 256}) {
      for (int partials : {2, 7, 16}) {
        const MergeStatesCase c{.problem = problem(16, 300, head_dim),
                                .partials = partials,
                                .input = pair[0],
                                .output = pair[1],
                                .strided = partials == 7};
        CAPTURE(c.name());
        const auto verdict = testing::run_merge_states_case(runtime, c);
        CHECK_MESSAGE(verdict.ok, verdict.describe());
      }
    }
  }
}

TEST_CASE("merge_state_in_place on the GPU equals the unsplit float64 result") {
  Runtime runtime;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (bool empty : {false, true}) {
      const MergeStatesCase c{.problem = problem(16, 300, 128),
                              .partials = 2,
                              .input = dtype,
                              .output = dtype,
                              .in_place = true,
                              .strided = true,
                              .empty_partial = empty};
      CAPTURE(c.name());
      const auto verdict = testing::run_merge_states_case(runtime, c);
      CHECK_MESSAGE(verdict.ok, verdict.describe());
    }
  }
}
