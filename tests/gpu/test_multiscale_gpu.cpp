// GPU tests (label `gpu`): multi-scale attention (retention) on real hardware against the
// float64 reference, both masks, forward and backward at sizes where every block shape occurs
// (full and partial blocks, decays that underflow inside the sequence), head dims 64 to 256;
// dM the same bits on every run.
#include <doctest/doctest.h>

#include "flashjit/flashjit.hpp"
#include "multiscale/multiscale_case.hpp"

using namespace flashjit;
using flashjit::testing::MultiScaleCase;

TEST_CASE("multi-scale attention on the GPU matches the float64 reference") {
  Runtime runtime;
  for (MultiScaleMask mask : {MultiScaleMask::decay, MultiScaleMask::tensor}) {
    for (std::int64_t head_dim : {64, 128, 256}) {
      for (bool backward : {false, true}) {
        MultiScaleCase c;
        // Partial blocks at both ends; the float64 reference keeps the run to seconds.
        c.batch = 2;
        c.heads_q = 4;
        c.heads_kv = 2;
        c.seqlen_q = c.seqlen_k = backward ? 300 : 600;
        c.head_dim = head_dim;
        c.mask = mask;
        c.backward = backward;
        c.mask_gradient = backward && mask == MultiScaleMask::tensor;
        c.gammas = {0.5, 0.9, 0.99, 0.999};  // some reach 160 keys, some every key
        CAPTURE(c.name());
        const auto verdict = testing::run_multiscale_case(runtime, c);
        CHECK_MESSAGE(verdict.ok, verdict.describe());
      }
    }
  }
}

TEST_CASE("multi-scale attention's dM is the same bits on every run on the GPU") {
  Runtime runtime;
  MultiScaleCase c;
  c.batch = 4;
  c.heads_q = c.heads_kv = 4;
  c.seqlen_q = c.seqlen_k = 200;
  c.mask = MultiScaleMask::tensor;
  c.backward = c.mask_gradient = true;
  const auto first = testing::run_multiscale_case(runtime, c);
  const auto second = testing::run_multiscale_case(runtime, c);
  REQUIRE(first.ok);
  CHECK(first.dmask == second.dmask);
}
