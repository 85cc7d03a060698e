// A block mask (Attention::block_mask) in the backward on the CPU emulator: the dK/dV kernels
// skip the query blocks that see none of their keys and the dQ kernel the key blocks its rows do
// not see, which changes no bit of dQ, dK or dV (a skipped block adds exactly zero) and removes
// their tensor FLOPs; on sm_80's mma.sync kernels and sm_90a's TMA backward, in both dQ modes
// (the TMA backward's deterministic mode, whose turns count every key block, skips none).
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

struct BackwardRun {
  std::vector<std::uint16_t> bits;  // dQ, dK, dV as written
  double tensor_flops = 0;          // of the backward's kernels
};

/// One forward and backward of `a` on `runtime` on random bf16 inputs (seeded, so two calls
/// see the same inputs); with `block_mask`, a.mask_mod's block mask built first and given to
/// both.
BackwardRun run_backward(Runtime& runtime, Attention a, bool block_mask) {
  a.automatic_block_mask = false;  // without a block mask, every block
  const std::size_t nq = static_cast<std::size_t>(a.batch * a.seqlen_q * a.heads_q * a.head_dim);
  const std::size_t nk = static_cast<std::size_t>(a.batch * a.seqlen_k * a.heads_kv * a.head_dim);
  std::mt19937 random(11);
  const auto upload = [&](std::size_t n) { return random_bf16_buffer(runtime, n, random); };
  const DeviceBuffer q = upload(nq), k = upload(nk), v = upload(nk), dout = upload(nq);
  const DeviceBuffer o = runtime.allocate(nq * 2), dq = runtime.allocate(nq * 2),
                     dk = runtime.allocate(nk * 2), dv = runtime.allocate(nk * 2);
  const DeviceBuffer lse =
      runtime.allocate(static_cast<std::size_t>(a.batch * a.heads_q * a.seqlen_q) * 4);
  const DeviceBuffer mask = block_mask ? attach_block_mask(runtime, a) : DeviceBuffer();
  const auto queries = [&](const DeviceBuffer& b) {
    return attention_tensor(b.data(), DType::bf16, Layout::bshd, a.batch, a.seqlen_q, a.heads_q,
                            a.head_dim);
  };
  const auto keys = [&](const DeviceBuffer& b) {
    return attention_tensor(b.data(), DType::bf16, Layout::bshd, a.batch, a.seqlen_k, a.heads_kv,
                            a.head_dim);
  };
  const TensorView lse_view = lse_tensor(static_cast<float*>(lse.data()), a);
  runtime.forward(a, queries(q), keys(k), keys(v), queries(o), lse_view);
  runtime.reset_emulated_work();  // the backward's alone
  runtime.backward(a, queries(q), keys(k), keys(v), queries(o), lse_view, queries(dout),
                   queries(dq), keys(dk), keys(dv));
  BackwardRun run;
  for (const KernelWork& kernel : runtime.emulated_work()) {
    run.tensor_flops += double(kernel.work.tensor_flops);
  }
  run.bits.resize(nq + 2 * nk);
  runtime.copy_to_host(run.bits.data(), dq.data(), nq * 2);
  runtime.copy_to_host(run.bits.data() + nq, dk.data(), nk * 2);
  runtime.copy_to_host(run.bits.data() + nq + nk, dv.data(), nk * 2);
  return run;
}

}  // namespace

TEST_CASE("block mask in the backward: 128-token documents over 384 tokens skip the others") {
  Attention a{
      .batch = 1, .heads_q = 2, .heads_kv = 1, .seqlen_q = 384, .seqlen_k = 384, .head_dim = 64};
  a.mask_mod = "q_idx / 128 == kv_idx / 128";
  for (Runtime* runtime : {&emulator(), &hopper_emulator()}) {
    for (bool deterministic : {false, true}) {
      a.deterministic = deterministic;
      const std::string mode = deterministic ? " deterministic" : " atomic dQ";
      INFO(runtime->device().arch() << mode);
      const BackwardRun plain = run_backward(*runtime, a, false);
      const BackwardRun skipping = run_backward(*runtime, a, true);
      CHECK(skipping.bits == plain.bits);  // a skipped block adds exactly nothing
      INFO("tensor FLOPs " << skipping.tensor_flops << " with the block mask, "
                           << plain.tensor_flops << " without");
      const bool skips = !(deterministic && runtime == &hopper_emulator());
      if (skips) {
        CHECK(skipping.tensor_flops <= 0.5 * plain.tensor_flops);
        CHECK(skipping.tensor_flops >= 0.25 * plain.tensor_flops);  // the documents' own blocks
      } else {
        CHECK(skipping.tensor_flops == plain.tensor_flops);
      }
    }
  }
}

}  // namespace flashjit::testing
