// merge_states on the CPU emulator: partial states over random disjoint key splits of real
// attention problems merge into the unsplit float64 result within the float32 bound (the
// invariant "split + merge equals unsplit"), in every dtype, both forms, strided views.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "merge_states/merge_states_case.hpp"
#include "support/emulator_runtime.hpp"

using namespace flashjit;
using flashjit::testing::MergeStatesCase;

namespace {

void check_case(const MergeStatesCase& c) {
  CAPTURE(c.name());
  const auto verdict = testing::run_merge_states_case(testing::emulator(), c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

reference::Problem problem(std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t head_dim,
                           bool causal) {
  return {.batch = 2,
          .heads_q = 3,
          .heads_kv = 1,
          .seqlen_q = seqlen_q,
          .seqlen_k = seqlen_k,
          .head_dim = head_dim,
          .causal = causal};
}

}  // namespace

TEST_CASE("2 to 8 partials over random key splits merge into the unsplit result") {
  for (int partials = 2; partials <= 8; ++partials) {
    for (bool causal : {false, true}) {
      MergeStatesCase c{.problem = problem(5, 37, 64, causal), .partials = partials};
      c.seed = static_cast<std::uint64_t>(partials * 10 + causal);
      check_case(c);
    }
  }
}

TEST_CASE("head dims: a step of the threads, more than one, and ragged") {
  for (std::int64_t head_dim : {1, 8, 40, 96, 128, 200, 256}) {
    check_case({.problem = problem(3, 20, head_dim, false), .partials = 3});
  }
}

TEST_CASE("every supported dtype pair") {
  const DType pairs[][2] = {{DType::f32, DType::f32},  {DType::f32, DType::f16},
                            {DType::f32, DType::bf16}, {DType::f16, DType::f16},
                            {DType::f16, DType::f32},  {DType::bf16, DType::bf16},
                            {DType::bf16, DType::f32}};
  for (const auto& pair : pairs) {
    check_case(
        {.problem = problem(4, 30, 64, true), .partials = 4, .input = pair[0], .output = pair[1]});
  }
}

TEST_CASE("a partial that saw no key contributes nothing, whatever its O holds") {
  for (int partials : {2, 5}) {
    check_case({.problem = problem(4, 25, 64, false), .partials = partials, .empty_partial = true});
  }
  // Causal with seqlen_q > seqlen_k: the first rows see no key in any partial (O 0, LSE -inf).
  check_case({.problem = problem(9, 4, 32, true), .partials = 3});
}

TEST_CASE("strided views: padded rows, partials apart, heads-major LSE") {
  for (DType dtype : {DType::f32, DType::bf16}) {
    check_case({.problem = problem(4, 33, 72, true),
                .partials = 3,
                .input = dtype,
                .output = dtype,
                .strided = true});
  }
  check_case({.problem = problem(4, 33, 64, false), .partials = 2, .write_lse = false});
}

TEST_CASE("the two-way form merges b into a in place") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    for (bool strided : {false, true}) {
      check_case({.problem = problem(5, 40, 64, true),
                  .partials = 2,
                  .input = dtype,
                  .output = dtype,
                  .in_place = true,
                  .strided = strided});
    }
  }
  check_case({.problem = problem(5, 40, 128, false),
              .partials = 2,
              .in_place = true,
              .empty_partial = true});
}

namespace {

/// merge_states over fp32 host arrays of one head ([partials, rows, 1, head_dim]) on the
/// emulator; returns the merged O and LSE.
std::pair<std::vector<float>, std::vector<float>> merge_on_emulator(
    const std::vector<float>& parts_o, const std::vector<float>& parts_lse, std::int64_t partials,
    std::int64_t rows, std::int64_t head_dim) {
  Runtime& runtime = testing::emulator();
  DeviceBuffer o_in = runtime.allocate(parts_o.size() * 4),
               lse_in = runtime.allocate(parts_lse.size() * 4);
  runtime.copy_to_device(o_in.data(), parts_o.data(), parts_o.size() * 4);
  runtime.copy_to_device(lse_in.data(), parts_lse.data(), parts_lse.size() * 4);
  DeviceBuffer o = runtime.allocate(rows * head_dim * 4), lse = runtime.allocate(rows * 4);
  runtime.merge_states(
      TensorView::contiguous(o_in.data(), DType::f32, {partials, rows, 1, head_dim}),
      TensorView::contiguous(lse_in.data(), DType::f32, {partials, rows, 1}),
      TensorView::contiguous(o.data(), DType::f32, {rows, 1, head_dim}),
      TensorView::contiguous(lse.data(), DType::f32, {rows, 1}));
  std::vector<float> o_out(rows * head_dim), lse_out(rows);
  runtime.copy_to_host(o_out.data(), o.data(), o_out.size() * 4);
  runtime.copy_to_host(lse_out.data(), lse.data(), lse_out.size() * 4);
  return {o_out, lse_out};
}

}  // namespace

TEST_CASE("every partial -inf, NaN in every O: O = 0 and LSE = -inf, no NaN") {
  constexpr std::int64_t kPartials = 3, kRows = 4, kHeadDim = 16;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> parts_o(kPartials * kRows * kHeadDim, std::nanf(""));
  const std::vector<float> parts_lse(kPartials * kRows, -inf);
  const auto [o, lse] = merge_on_emulator(parts_o, parts_lse, kPartials, kRows, kHeadDim);
  for (float x : o) CHECK(x == 0.0f);
  for (float x : lse) CHECK(x == -inf);
}

TEST_CASE("a NaN in the O of a partial whose LSE is -inf does not reach the merge") {
  constexpr std::int64_t kHeadDim = 8;
  std::vector<float> parts_o(2 * kHeadDim, 1.0f);                       // partial 0: O = 1, LSE = 0
  std::fill(parts_o.begin() + kHeadDim, parts_o.end(), std::nanf(""));  // partial 1: NaN
  const std::vector<float> parts_lse = {0.0f, -std::numeric_limits<float>::infinity()};
  const auto [o, lse] = merge_on_emulator(parts_o, parts_lse, 2, 1, kHeadDim);
  for (float x : o) CHECK(x == 1.0f);
  CHECK(lse[0] == 0.0f);
}
