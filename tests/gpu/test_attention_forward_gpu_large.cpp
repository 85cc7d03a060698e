// The forward op on the GPU at real sizes (label gpu): 4096, 8192 and 16384 tokens per sequence
// with batch · seqlen = 16k tokens and head_dim · heads = 2048 (FlashAttention's benchmark
// shapes), causal and not, plus GQA, fp16, the [B, H, L, D] layout, a sliding window and
// softcap. The float64 reference covers a sample of rows (ForwardCase::sample_rows); every
// element of O and LSE is still checked for having been written.
#include <doctest/doctest.h>

#include <vector>

#include "gpu/forward_runs.hpp"

namespace flashjit::testing {
namespace {

using reference::Layout;

constexpr std::int64_t kTokens = 16384;
constexpr std::int64_t kModelWidth = 2048;  // head_dim · heads
/// Rows checked of each sampled (batch, head) pair, evenly spread, the first and last included.
constexpr std::int64_t kSampleRows = 64;

ForwardCase real_case(std::int64_t seqlen, std::int64_t head_dim, bool causal) {
  const std::int64_t heads = kModelWidth / head_dim;
  ForwardCase c = make_case(heads, heads, seqlen, seqlen, head_dim, causal);
  c.problem.batch = kTokens / seqlen;
  c.sample_rows = kSampleRows;
  return c;
}

/// Head dims 64, 128 and 256 at `seqlen`, causal and not.
std::vector<ForwardCase> benchmark_shapes(std::int64_t seqlen) {
  std::vector<ForwardCase> cases;
  for (std::int64_t head_dim : {64, 128, 256}) {
    for (bool causal : {false, true}) cases.push_back(real_case(seqlen, head_dim, causal));
  }
  return cases;
}

TEST_CASE("forward on the GPU at 4096 tokens (batch 4)") {
  std::vector<ForwardCase> cases = benchmark_shapes(4096);
  ForwardCase bhsd = real_case(4096, 64, true);
  bhsd.layout = Layout::bhsd;
  ForwardCase softcap = real_case(4096, 128, true);
  softcap.problem.softcap = 30;
  cases.insert(cases.end(), {bhsd, softcap});
  check_cases(cases, ConfigSweep::default_only);
}

TEST_CASE("forward on the GPU at 8192 tokens (batch 2)") {
  std::vector<ForwardCase> cases = benchmark_shapes(8192);
  ForwardCase f16 = real_case(8192, 128, true);
  f16.dtype = DType::f16;
  ForwardCase gqa = real_case(8192, 128, true);  // 8:1, as Llama 3 70B
  gqa.problem.heads_kv = gqa.problem.heads_q / 8;
  cases.insert(cases.end(), {f16, gqa});
  check_cases(cases, ConfigSweep::default_only);
}

TEST_CASE("forward on the GPU at 16384 tokens (batch 1)") {
  std::vector<ForwardCase> cases = benchmark_shapes(16384);
  ForwardCase sliding = real_case(16384, 128, true);  // a 4096-key sliding window
  sliding.problem.window_left = 4096;
  ForwardCase f16 = real_case(16384, 64, false);
  f16.dtype = DType::f16;
  cases.insert(cases.end(), {sliding, f16});
  check_cases(cases, ConfigSweep::default_only);
}

TEST_CASE("forward on the GPU at 4096 tokens: every config of head dims 64 and 128") {
  // One sequence of 4 heads keeps each run's inputs small; the configs see as many key blocks
  // as at full size.
  std::vector<ForwardCase> cases;
  for (std::int64_t head_dim : {64, 128}) {
    for (bool causal : {false, true}) {
      ForwardCase c = make_case(4, 4, 4096, 4096, head_dim, causal);
      c.sample_rows = kSampleRows;
      cases.push_back(c);
    }
  }
  check_cases(cases, ConfigSweep::every_config);
}

}  // namespace
}  // namespace flashjit::testing
