// Used lengths inside padded buffers (FlashAttention's seqused_q and seqused_k:
// Sequences::seqused_q, and seqlens_k in the backward) on the CPU emulator: each sequence is its
// used rows alone (the masks align to them) against its float64 reference, the rows past them hold
// NaN, which no result may read, and come out as o 0, lse -inf, gradients 0; packed and dense,
// causal and not, GQA, both dtypes, both dQ modes; sm_90a's packed prefill keeps its TMA kernel
// with used queries and takes mma.sync with used keys; bad input is named before anything is
// written, by the host's checks and by the device-side pass a GPU runs with check_indices.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/check/inference_case.hpp"
#include "attention/inference/attention_inference.hpp"
#include "flashjit/error.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

void check_forward(Runtime& runtime, const InferenceCase& c) {
  INFO(c.name());
  const InferenceVerdict verdict = run_inference_case(runtime, c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

void check_backward(Runtime& runtime, const InferenceCase& c) {
  INFO(c.name());
  const InferenceVerdict verdict = run_inference_backward_case(runtime, c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

/// Five sequences, packed: used queries and keys of 0, 1 and more, each with unused rows past
/// them (none for one), GQA 2:1.
InferenceCase padded_case() {
  InferenceCase c;
  c.seqlens_q = {1, 0, 37, 70, 5};
  c.unused_q = {3, 2, 0, 9, 60};
  c.seqlens_k = {1, 20, 0, 90, 33};
  c.unused_k = {5, 0, 7, 30, 1};
  c.packed_q = true;
  c.keys = KeyStorage::packed;
  c.heads_q = 4;
  c.heads_kv = 2;
  return c;
}

}  // namespace

TEST_CASE("seqused_q: the forward reads the used queries and keys only, the rest o 0, lse -inf") {
  for (bool causal : {false, true}) {
    for (DType dtype : {DType::bf16, DType::f16}) {
      InferenceCase c = padded_case();
      c.causal = causal;
      c.dtype = dtype;
      check_forward(emulator(), c);
    }
  }
  {
    InferenceCase c = padded_case();  // used queries over keys all used
    c.unused_k = {};
    c.window_left = 16;
    check_forward(emulator(), c);
  }
  {
    // Dense queries of one span (the used counts differ) over a dense cache, decoding-sized and
    // GQA-packed (8 query heads a key head), unsplit.
    InferenceCase c;
    c.seqlens_q = {1, 3, 0, 4};
    c.unused_q = {3, 1, 4, 0};
    c.seqlens_k = {40, 17, 9, 64};
    c.heads_q = 8;
    c.heads_kv = 1;
    c.causal = true;
    check_forward(emulator(), c);
  }
}

TEST_CASE("seqused_q and seqused_k with forced splits (FlashAttention's num_splits > 1)") {
  // The splits' partials cover the used rows only; their merge reads the rest too (NaN on the
  // emulator, which allocates NaN), and the fill after it writes o 0 and lse -inf there.
  for (int splits : {2, 3}) {
    InferenceCase c = padded_case();
    c.splits = splits;
    c.causal = splits == 3;
    c.seed = static_cast<std::uint64_t>(90 + splits);
    check_forward(emulator(), c);
  }
  // Decoding-sized dense queries, GQA-packed, split: each split's partial rows of the unused
  // queries are never written.
  InferenceCase c;
  c.seqlens_q = {1, 3, 0, 4};
  c.unused_q = {3, 1, 4, 0};
  c.seqlens_k = {40, 17, 9, 64};
  c.unused_k = {0, 5, 2, 7};
  c.keys = KeyStorage::packed;
  c.heads_q = 8;
  c.heads_kv = 1;
  c.splits = 4;
  check_forward(emulator(), c);
  // Used keys alone (no unused queries) over a dense cache, split.
  InferenceCase keys_only;
  keys_only.seqlens_q = {2, 2};
  keys_only.seqlens_k = {70, 9};
  keys_only.unused_k = {10, 81};
  keys_only.splits = 3;
  keys_only.causal = true;
  check_forward(emulator(), keys_only);
}

TEST_CASE("seqused_q: on sm_90a packed prefill keeps its TMA kernel, used keys take mma.sync") {
  // Used queries alone: the TMA kernel (the query rows its box reads past them are their own
  // scores' alone and are not stored). Used keys too: mma.sync, whose loads stop at the count.
  for (bool used_keys : {false, true}) {
    InferenceCase c = padded_case();
    if (!used_keys) c.unused_k = {};
    c.head_dim = 128;
    c.causal = true;
    hopper_emulator().reset_emulated_work();
    check_forward(hopper_emulator(), c);
    bool tma = false, forward_ran = false;
    for (const KernelWork& kernel : hopper_emulator().emulated_work()) {
      tma |= kernel.kernel.find(".tma") != std::string::npos;
      forward_ran |= kernel.kernel.starts_with("attention_forward.");
    }
    CHECK(forward_ran);
    CHECK(tma == !used_keys);
  }
}

TEST_CASE("seqused_q and seqused_k in the backward: gradients of the used rows, 0 past them") {
  for (bool deterministic : {false, true}) {
    InferenceCase c = padded_case();
    c.causal = true;
    c.deterministic = deterministic;
    check_backward(emulator(), c);
  }
  {
    InferenceCase c = padded_case();
    c.dtype = DType::f16;
    c.head_dim = 128;
    check_backward(hopper_emulator(), c);  // the TMA backward's default gives way to mma.sync
  }
  {
    InferenceCase c;  // dense queries and keys of one span each
    c.seqlens_q = {20, 0, 33};
    c.unused_q = {13, 33, 0};
    c.seqlens_k = {50, 8, 1};
    c.unused_k = {0, 42, 49};
    c.heads_q = 2;
    c.heads_kv = 1;
    c.causal = true;
    check_backward(emulator(), c);
  }
}

namespace {

constexpr std::int64_t kBatch = 2, kSeqlen = 8, kHeads = 2, kHeadDim = 64;

/// A valid call with dense q, k, v of kSeqlen rows and seqused_q {3, 8}; each test breaks one
/// thing.
struct SequsedCall {
  DeviceBuffer q_buf, kv_buf, o_buf, lse_buf, used_buf, splits_kv;
  Attention attention{.batch = kBatch,
                      .heads_q = kHeads,
                      .heads_kv = kHeads,
                      .seqlen_q = kSeqlen,
                      .seqlen_k = kSeqlen,
                      .head_dim = kHeadDim};
  Sequences sequences;
  TensorView q, k, o, lse;

  explicit SequsedCall(std::vector<std::int32_t> used = {3, kSeqlen}) {
    const std::size_t bytes = kBatch * kSeqlen * kHeads * kHeadDim * 2;
    q_buf = filled_buffer(bytes, 0);
    kv_buf = filled_buffer(bytes, 0);
    o_buf = filled_buffer(bytes, 0x7f);
    lse_buf = filled_buffer(kBatch * kHeads * kSeqlen * 4, 0x7f);
    used_buf = emulator().allocate(used.size() * 4);
    emulator().copy_to_device(used_buf.data(), used.data(), used.size() * 4);
    splits_kv = filled_buffer(bytes, 0);
    const auto tensor = [](const DeviceBuffer& b) {
      return TensorView::contiguous(b.data(), DType::bf16, {kBatch, kSeqlen, kHeads, kHeadDim});
    };
    q = tensor(q_buf);
    k = tensor(kv_buf);
    o = tensor(o_buf);
    lse = TensorView::contiguous(lse_buf.data(), DType::f32, {kBatch, kHeads, kSeqlen});
    sequences.seqused_q = TensorView::contiguous(used_buf.data(), DType::i32,
                                                 {static_cast<std::int64_t>(used.size())});
  }

  bool untouched() const { return holds_only(o_buf, 0x7f) && holds_only(lse_buf, 0x7f); }
};

void check_refused(SequsedCall& call, const std::string& argument) {
  try {
    emulator().forward(call.attention, call.sequences, call.q, call.k, call.k, call.o, call.lse);
    FAIL("accepted; expected an error naming " << argument);
  } catch (const InvalidArgument& error) {
    CHECK_MESSAGE(error.argument() == argument, error.what());
  }
  CHECK(call.untouched());
}

}  // namespace

TEST_CASE("seqused_q: bad input is named before anything is written") {
  {
    SequsedCall call;  // the valid call runs
    emulator().forward(call.attention, call.sequences, call.q, call.k, call.k, call.o, call.lse);
    CHECK_FALSE(call.untouched());
  }
  {
    SequsedCall call({3, kSeqlen + 1});  // past the sequence's rows
    check_refused(call, "sequences.seqused_q");
  }
  {
    SequsedCall call({-1, 2});
    check_refused(call, "sequences.seqused_q");
  }
  {
    SequsedCall call({3, 4, 5});  // one count too many
    check_refused(call, "sequences.seqused_q.shape");
  }
  {
    SequsedCall call;  // an append's queries are all used
    const TensorView fresh =
        TensorView::contiguous(call.splits_kv.data(), DType::bf16, {kBatch, 1, kHeads, kHeadDim});
    std::vector<std::int32_t> cached = {4, 4};
    DeviceBuffer counts = emulator().allocate(8);
    emulator().copy_to_device(counts.data(), cached.data(), 8);
    call.sequences.seqlens_k = TensorView::contiguous(counts.data(), DType::i32, {kBatch});
    call.sequences.k_new = fresh;
    call.sequences.v_new = fresh;
    check_refused(call, "sequences.seqused_q");
  }
}

TEST_CASE("seqused_q: the device-side index check (a GPU's check_indices) finds a bad count") {
  detail::RuntimeBackend& backend = detail::RuntimeParts::backend(emulator());
  const auto find = [&](SequsedCall& call) {
    const kernels::InferenceTensors t = kernels::validate_inference_arguments(
        call.attention, call.sequences, call.q, call.k, call.k, call.o, call.lse);
    return kernels::find_index_violation(backend, call.attention, call.sequences, t, nullptr);
  };
  SequsedCall good;
  CHECK_FALSE(find(good).found);
  SequsedCall past({3, kSeqlen + 1});
  const kernels::IndexViolationFound bad = find(past);
  CHECK((bad.found && bad.sequence == 1 && bad.kind == 7));  // IndexViolation::seqused_q
  SequsedCall negative({-2, 1});
  CHECK(find(negative).sequence == 0);
}

}  // namespace flashjit::testing
