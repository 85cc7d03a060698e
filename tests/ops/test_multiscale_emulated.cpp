// Multi-scale attention (retention) on the CPU emulator against the float64 reference, forward
// and backward, over ragged shapes with both masks (the decay generated in the kernel, and a
// mask tensor with its gradient); the skipped blocks in the work counters; dM the same bits on
// every run; and the reference's own gradients against finite differences of its forward.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "flashjit/flashjit.hpp"
#include "multiscale/multiscale_case.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

MultiScaleCase shape(std::int64_t batch, std::int64_t heads_q, std::int64_t heads_kv,
                     std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t head_dim) {
  MultiScaleCase c;
  c.batch = batch;
  c.heads_q = heads_q;
  c.heads_kv = heads_kv;
  c.seqlen_q = seqlen_q;
  c.seqlen_k = seqlen_k;
  c.head_dim = head_dim;
  return c;
}

void check_case(const MultiScaleCase& c) {
  CAPTURE(c.name());
  const MultiScaleVerdict verdict = run_multiscale_case(emulator(), c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

/// Ragged shapes: partial blocks of queries and keys, more queries than keys (rows that see no
/// key), GQA and MQA, decoding's single query, head dims from 8 to 256.
std::vector<MultiScaleCase> ragged_shapes() {
  return {shape(1, 2, 2, 64, 64, 64), shape(2, 4, 1, 37, 53, 32), shape(1, 2, 2, 1, 100, 128),
          shape(1, 2, 1, 40, 17, 64), shape(1, 1, 1, 19, 19, 8),  shape(1, 2, 2, 20, 33, 256),
          shape(1, 3, 3, 70, 130, 96)};
}

}  // namespace

TEST_CASE("multi-scale forward, decay mask, ragged shapes") {
  for (MultiScaleCase c : ragged_shapes()) check_case(c);
  MultiScaleCase f16 = shape(1, 2, 2, 50, 70, 64);
  f16.dtype = DType::f16;
  check_case(f16);
  MultiScaleCase scaled = shape(1, 2, 2, 48, 48, 64);
  scaled.scale = 0.5f;  // r > 1 on most rows: the normalizer divides
  check_case(scaled);
}

TEST_CASE("multi-scale forward, mask tensor, ragged shapes") {
  for (MultiScaleCase c : ragged_shapes()) {
    c.mask = MultiScaleMask::tensor;
    check_case(c);
  }
}

TEST_CASE("multi-scale backward, decay mask") {
  for (MultiScaleCase c : {shape(1, 2, 2, 64, 64, 64), shape(2, 4, 1, 37, 53, 32),
                           shape(1, 2, 1, 40, 17, 64), shape(1, 2, 2, 20, 33, 128)}) {
    c.backward = true;
    c.scale = 0.5f;  // both sides of r = 1 occur: the normalizer's term of dA matters
    check_case(c);
  }
}

TEST_CASE("multi-scale backward, mask tensor with its gradient, the same bits on every run") {
  for (MultiScaleCase c :
       {shape(1, 2, 2, 64, 64, 64), shape(3, 4, 2, 37, 53, 32), shape(2, 2, 1, 40, 17, 64)}) {
    c.backward = true;
    c.mask = MultiScaleMask::tensor;
    c.mask_gradient = true;
    check_case(c);
  }
  MultiScaleCase c = shape(3, 2, 1, 33, 45, 32);
  c.backward = c.mask_gradient = true;
  c.mask = MultiScaleMask::tensor;
  const MultiScaleVerdict first = run_multiscale_case(emulator(), c);
  const MultiScaleVerdict second = run_multiscale_case(emulator(), c);
  REQUIRE(first.ok);
  CHECK(first.dmask == second.dmask);
}

TEST_CASE("the decay mask's zero blocks are skipped: above the diagonal and past the decay") {
  // Counted tensor FLOPs of the forward: the full mask tensor visits every block; the decay
  // visits the causal half; a fast decay (γ = 0.5: 2^−160 after 160 keys) only the diagonal's
  // neighbourhood.
  const auto forward_flops = [](MultiScaleCase c) {
    emulator().reset_emulated_work();
    const MultiScaleVerdict verdict = run_multiscale_case(emulator(), c);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
    std::uint64_t flops = 0;
    for (const KernelWork& k : emulator().emulated_work()) flops += k.work.tensor_flops;
    return flops;
  };
  MultiScaleCase c = shape(1, 1, 1, 1024, 1024, 32);
  c.gammas = {1.0 - 1.0 / 4096};  // reaches every key
  const std::uint64_t causal = forward_flops(c);
  c.gammas = {0.5};
  const std::uint64_t fast = forward_flops(c);
  c.mask = MultiScaleMask::tensor;
  const std::uint64_t full = forward_flops(c);
  CHECK(causal < full * 6 / 10);  // about half, plus the diagonal blocks
  CHECK(fast < causal * 55 / 100);
}

TEST_CASE("the reference's gradients match finite differences of its forward") {
  for (bool decay : {true, false}) {
    reference::MultiScaleProblem p;
    p.batch = 1;
    p.heads_q = 2;
    p.heads_kv = 1;
    p.seqlen_q = 5;
    p.seqlen_k = 6;
    p.head_dim = 3;
    p.scale = 0.9;
    p.decay = decay;
    p.gammas = {0.8, 0.6};
    for (int i = 0; i < 2 * 5 * 6; ++i) p.mask.push_back(std::sin(1.7 * i) * 0.9);
    reference::Tensor4 q = reference::random_tensor({1, 5, 2, 3}, reference::Layout::bshd, 11);
    reference::Tensor4 k = reference::random_tensor({1, 6, 1, 3}, reference::Layout::bshd, 12);
    reference::Tensor4 v = reference::random_tensor({1, 6, 1, 3}, reference::Layout::bshd, 13);
    const reference::Tensor4 dout =
        reference::random_tensor({1, 5, 2, 3}, reference::Layout::bshd, 14);
    const reference::MultiScaleGradients g =
        reference::multiscale_backward(p, q.view(), k.view(), v.view(), dout.view());
    const auto loss = [&] {
      const reference::Tensor4 o =
          reference::multiscale_forward(p, q.view(), k.view(), v.view()).out;
      double sum = 0;
      for (std::size_t i = 0; i < o.values.size(); ++i) sum += o.values[i] * dout.values[i];
      return sum;
    };
    const auto check_all = [&](std::vector<double>& x, const std::vector<double>& grad,
                               const char* what) {
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double h = 1e-6, saved = x[i];
        x[i] = saved + h;
        const double up = loss();
        x[i] = saved - h;
        const double down = loss();
        x[i] = saved;
        CAPTURE(what);
        CAPTURE(i);
        CHECK(grad[i] == doctest::Approx((up - down) / (2 * h)).epsilon(1e-5));
      }
    };
    check_all(q.values, g.dq.values, "dq");
    check_all(k.values, g.dk.values, "dk");
    check_all(v.values, g.dv.values, "dv");
    if (!decay) check_all(p.mask, g.dmask, "dmask");
  }
}

}  // namespace flashjit::testing
