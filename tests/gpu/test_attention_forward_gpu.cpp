// The forward op on the GPU (label gpu), checked against the float64 reference with the bar of
// docs/design.md's bar: the checks of tests/ops/test_attention_forward_emulated.cpp (ragged
// lengths, causal with seqlen_q != seqlen_k, head dims from 8 to 256, GQA/MQA, both layouts,
// windows, softcap, fp16 and bf16), more head dims, and for bf16 head dims 64 and 128 every
// config of the space that fits the device. Real sizes are in test_attention_forward_gpu_large.
#include <doctest/doctest.h>

#include <vector>

#include "gpu/forward_runs.hpp"

namespace flashjit::testing {
namespace {

using reference::Layout;

TEST_CASE("forward on the GPU: ragged lengths") {
  ForwardCase batched = with_layout(make_case(2, 2, 33, 65, 32), Layout::bhsd);
  batched.problem.batch = 3;
  ForwardCase batched_long = make_case(4, 4, 1000, 1000, 128, true);
  batched_long.problem.batch = 2;
  check_cases({make_case(1, 1, 1, 1, 64), make_case(1, 1, 17, 17, 64),
               make_case(2, 2, 63, 63, 64, true), make_case(1, 1, 129, 129, 64),
               make_case(1, 1, 1000, 1000, 64), make_case(1, 1, 1, 1, 128, true), batched,
               batched_long});
}

TEST_CASE("forward on the GPU: long sequences") {
  check_cases({make_case(1, 1, 1000, 1000, 64, true), make_case(1, 1, 1000, 129, 64),
               make_case(1, 1, 1, 1000, 64, true), make_case(1, 1, 17, 1000, 128, true),
               make_case(2, 2, 2049, 2047, 128, true), make_case(1, 1, 3000, 3001, 64)});
}

TEST_CASE("forward on the GPU: causal with seqlen_q != seqlen_k") {
  // seqlen_q > seqlen_k leaves the first rows with no visible key: O = 0, LSE = -inf.
  check_cases({make_case(1, 1, 129, 63, 64, true), make_case(1, 1, 63, 129, 64, true),
               make_case(1, 1, 1000, 17, 128, true), make_case(1, 1, 1000, 1, 64, true),
               make_case(1, 1, 17, 1000, 64, true), make_case(2, 2, 1, 777, 128, true),
               with_dtype(make_case(1, 1, 129, 63, 80, true), DType::f16)});
}

TEST_CASE("forward on the GPU: head dims") { check_cases(head_dim_cases(make_case)); }

TEST_CASE("forward on the GPU: GQA and MQA") {
  check_cases({make_case(8, 1, 63, 63, 64),
               with_layout(make_case(8, 1, 129, 129, 128, true), Layout::bhsd),
               make_case(8, 1, 1000, 1000, 128, true), make_case(4, 2, 40, 90, 64),
               make_case(6, 3, 17, 17, 40, true),
               with_dtype(make_case(16, 2, 300, 300, 256, true), DType::f16)});
}

TEST_CASE("forward on the GPU: windows, softcap and scale") {
  ForwardCase scaled = make_case(1, 1, 65, 65, 64);
  scaled.problem.softmax_scale = 0.5;
  ForwardCase combined = with_softcap(windowed(90, 120, 20, 10), 20);
  combined.problem.heads_q = 4;
  combined.problem.heads_kv = 2;
  combined.layout = Layout::bhsd;
  ForwardCase no_lse = make_case(1, 1, 40, 40, 64, true);
  no_lse.write_lse = false;
  check_cases({windowed(200, 200, 32, 0), windowed(129, 129, 16, 16), windowed(129, 129, 64, -1),
               windowed(129, 63, -1, 8), windowed(100, 100, 0, 0), windowed(50, 50, 500, 500, 128),
               windowed(2000, 2000, 256, 0, 128), with_softcap(make_case(1, 1, 129, 129, 64), 30),
               with_softcap(make_case(2, 2, 70, 70, 128, true), 5),
               with_dtype(with_softcap(make_case(1, 1, 300, 300, 256, true), 50), DType::f16),
               scaled, combined, no_lse});
}

}  // namespace
}  // namespace flashjit::testing
