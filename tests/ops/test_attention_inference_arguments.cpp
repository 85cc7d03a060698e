// Bad input to the inference forward (Runtime::forward with Sequences) on the emulator: each
// is an InvalidArgument naming the argument, thrown before anything is launched, and the
// outputs keep what they held (nothing written). The emulator always checks the index arrays'
// values, so a page index out of range or a decreasing cu_seqlens is named with its position.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/inference/attention_inference.hpp"
#include "flashjit/error.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

constexpr std::int64_t kBatch = 2, kHeadsQ = 8, kHeadsKv = 2, kHeadDim = 64, kPageSize = 16;
constexpr std::int64_t kPages = 6, kMaxPages = 3, kQueries = 2;

/// A valid paged decoding call (2 sequences, 2 queries each, 20 and 33 keys in pages of 16),
/// built in emulator memory; each test breaks one thing.
struct PagedCall {
  DeviceBuffer q_buf, k_buf, v_buf, o_buf, lse_buf, table_buf, lens_buf, cu_buf;
  Attention attention;
  Sequences sequences;
  TensorView q, k, v, o, lse;

  PagedCall() {
    Runtime& rt = emulator();
    const auto buffer = filled_buffer;
    q_buf = buffer(kBatch * kQueries * kHeadsQ * kHeadDim * 2, 0);
    k_buf = buffer(kPages * kPageSize * kHeadsKv * kHeadDim * 2, 0);
    v_buf = buffer(kPages * kPageSize * kHeadsKv * kHeadDim * 2, 0);
    o_buf = buffer(kBatch * kQueries * kHeadsQ * kHeadDim * 2, 0x7f);
    lse_buf = buffer(kBatch * kHeadsQ * kQueries * 4, 0x7f);
    table_buf = rt.allocate(kBatch * kMaxPages * 4);
    lens_buf = rt.allocate(kBatch * 4);
    cu_buf = rt.allocate((kBatch + 1) * 4);
    set_table({4, 1, -1, 0, 5, 2});
    set_lengths({20, 33});
    set_offsets({0, 2, 4});
    attention.batch = kBatch;
    attention.heads_q = kHeadsQ;
    attention.heads_kv = kHeadsKv;
    attention.seqlen_q = kQueries;
    attention.seqlen_k = 33;
    attention.head_dim = kHeadDim;
    attention.causal = true;
    q = TensorView::contiguous(q_buf.data(), DType::bf16, {kBatch, kQueries, kHeadsQ, kHeadDim});
    o = TensorView::contiguous(o_buf.data(), DType::bf16, {kBatch, kQueries, kHeadsQ, kHeadDim});
    k = TensorView::contiguous(k_buf.data(), DType::bf16, {kPages, kPageSize, kHeadsKv, kHeadDim});
    v = TensorView::contiguous(v_buf.data(), DType::bf16, {kPages, kPageSize, kHeadsKv, kHeadDim});
    lse = TensorView::contiguous(lse_buf.data(), DType::f32, {kBatch, kHeadsQ, kQueries});
    sequences.page_table =
        TensorView::contiguous(table_buf.data(), DType::i32, {kBatch, kMaxPages});
    sequences.seqlens_k = TensorView::contiguous(lens_buf.data(), DType::i32, {kBatch});
  }

  void set_table(const std::vector<std::int32_t>& t) {
    emulator().copy_to_device(table_buf.data(), t.data(), t.size() * 4);
  }
  void set_lengths(const std::vector<std::int32_t>& l) {
    emulator().copy_to_device(lens_buf.data(), l.data(), l.size() * 4);
  }
  void set_offsets(const std::vector<std::int32_t>& c) {
    emulator().copy_to_device(cu_buf.data(), c.data(), c.size() * 4);
  }

  void run() { emulator().forward(attention, sequences, q, k, v, o, lse); }

  /// Whether o and lse still hold their 0x7f fill.
  bool outputs_untouched() const { return holds_only(o_buf, 0x7f) && holds_only(lse_buf, 0x7f); }
};

/// `run()` throws InvalidArgument naming `argument` with `words` in its message, and `call`'s
/// outputs keep their fill.
void check_rejected(PagedCall& call, const std::function<void()>& run, const std::string& argument,
                    const std::string& words) {
  try {
    run();
    FAIL("accepted; expected InvalidArgument(" << argument << ")");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == argument);
    const std::string message = e.what();
    CHECK_MESSAGE(message.find(words) != std::string::npos, message);
  }
  CHECK(call.outputs_untouched());
}

/// check_rejected of the call's forward (call.run()).
void check_rejected(PagedCall& call, const std::string& argument, const std::string& words) {
  check_rejected(
      call, [&] { call.run(); }, argument, words);
}

}  // namespace

TEST_CASE("the valid call runs and writes its outputs") {
  PagedCall call;
  call.run();
  CHECK_FALSE(call.outputs_untouched());
}

TEST_CASE("a page index out of range is named with its position and value") {
  PagedCall call;
  call.set_table({4, 1, -1, 0, 6, 2});  // sequence 1's second page: 6, there are 6 pages
  check_rejected(call, "sequences.page_table", "position [1, 1] holds 6");
  call.set_table({-2, 1, -1, 0, 5, 2});
  check_rejected(call, "sequences.page_table", "position [0, 0] holds -2");
}

TEST_CASE("pages past a sequence's length are not checked (nor read)") {
  PagedCall call;
  call.set_table({4, 1, 99, 0, 5, 2});  // sequence 0 uses 2 pages of its 3
  call.run();
  CHECK_FALSE(call.outputs_untouched());
}

TEST_CASE("a cu_seqlens that decreases, or does not start at 0, is named") {
  PagedCall call;
  call.sequences.cu_seqlens_q =
      TensorView::contiguous(call.cu_buf.data(), DType::i32, {kBatch + 1});
  call.q = TensorView::contiguous(call.q_buf.data(), DType::bf16,
                                  {kBatch * kQueries, kHeadsQ, kHeadDim});
  call.o = TensorView::contiguous(call.o_buf.data(), DType::bf16,
                                  {kBatch * kQueries, kHeadsQ, kHeadDim});
  call.lse = TensorView::contiguous(call.lse_buf.data(), DType::f32, {kHeadsQ, kBatch * kQueries});
  call.set_offsets({0, 2, 1});
  check_rejected(call, "sequences.cu_seqlens_q", "decreases at position 2");
  call.set_offsets({1, 2, 3});
  check_rejected(call, "sequences.cu_seqlens_q", "position 0 holds 1");
  call.set_offsets({0, 2, 5});  // 3 rows fit seqlen_q 3, but not the 4 packed rows
  call.attention.seqlen_q = 3;
  check_rejected(call, "sequences.cu_seqlens_q", "position 2 holds 5");
  call.attention.seqlen_q = 2;
  check_rejected(call, "sequences.cu_seqlens_q", "gives sequence 1 3 rows");
  call.set_offsets({0, 2, 4});
  call.run();
  CHECK_FALSE(call.outputs_untouched());
}

TEST_CASE("a page size of 0 is named") {
  PagedCall call;
  call.k = TensorView::contiguous(call.k_buf.data(), DType::bf16, {kPages, 0, kHeadsKv, kHeadDim});
  check_rejected(call, "k.shape", "must be at least 1");
}

TEST_CASE("key counts past seqlen_k, and missing or conflicting arrays, are named") {
  PagedCall call;
  call.set_lengths({20, 34});
  check_rejected(call, "sequences.seqlens_k", "position 1 holds 34");
  call.set_lengths({20, 33});
  call.attention.seqlen_k = 49;  // 3 pages of 16 hold 48
  check_rejected(call, "attention.seqlen_k", "holds at most 48");
  call.attention.seqlen_k = 33;
  call.sequences.seqlens_k = {};
  check_rejected(call, "sequences.seqlens_k", "required with a page_table");
  call.sequences.seqlens_k = TensorView::contiguous(call.lens_buf.data(), DType::i32, {kBatch});
  call.sequences.cu_seqlens_k =
      TensorView::contiguous(call.cu_buf.data(), DType::i32, {kBatch + 1});
  check_rejected(call, "sequences.cu_seqlens_k", "absent with a page_table");
}

TEST_CASE("index arrays must be int32 of the right shape, splits within range") {
  PagedCall call;
  call.sequences.seqlens_k = TensorView::contiguous(call.lens_buf.data(), DType::f32, {kBatch});
  check_rejected(call, "sequences.seqlens_k.dtype", "must be int32");
  call.sequences.seqlens_k = TensorView::contiguous(call.lens_buf.data(), DType::i32, {kBatch - 1});
  check_rejected(call, "sequences.seqlens_k.shape", "");
  call.sequences.seqlens_k = TensorView::contiguous(call.lens_buf.data(), DType::i32, {kBatch});
  call.sequences.splits = 65;
  check_rejected(call, "sequences.splits", "1 to 64");
}

TEST_CASE("the device-side index check (as a GPU runs it with check_indices) finds bad indices") {
  PagedCall call;
  detail::RuntimeBackend& backend = detail::RuntimeParts::backend(emulator());
  const auto find = [&] {
    const kernels::InferenceTensors t = kernels::validate_inference_arguments(
        call.attention, call.sequences, call.q, call.k, call.v, call.o, call.lse);
    return kernels::find_index_violation(backend, call.attention, call.sequences, t, nullptr);
  };
  CHECK_FALSE(find().found);
  call.set_table({4, 1, 99, 0, 5, 2});  // an unused page: not a violation
  CHECK_FALSE(find().found);
  call.set_table({4, 1, -1, 0, 6, 2});
  kernels::IndexViolationFound bad = find();
  CHECK(bad.found);
  CHECK(bad.sequence == 1);
  CHECK(bad.kind == 4);  // IndexViolation::page_table
  CHECK(bad.position == 1);
  call.set_table({4, 1, -1, 0, 5, 2});
  call.set_lengths({20, 34});
  bad = find();
  CHECK((bad.found && bad.sequence == 1 && bad.kind == 3));  // seqlens_k
  call.set_lengths({-1, 34});
  CHECK(find().sequence == 0);  // the first sequence's violation wins
  call.set_lengths({20, 33});
  call.sequences.cu_seqlens_q =
      TensorView::contiguous(call.cu_buf.data(), DType::i32, {kBatch + 1});
  call.q = TensorView::contiguous(call.q_buf.data(), DType::bf16,
                                  {kBatch * kQueries, kHeadsQ, kHeadDim});
  call.o = TensorView::contiguous(call.o_buf.data(), DType::bf16,
                                  {kBatch * kQueries, kHeadsQ, kHeadDim});
  call.lse = TensorView::contiguous(call.lse_buf.data(), DType::f32, {kHeadsQ, kBatch * kQueries});
  CHECK_FALSE(find().found);
  call.set_offsets({0, 2, 1});
  bad = find();
  CHECK((bad.found && bad.sequence == 1 && bad.kind == 1));  // cu_seqlens_q decreases
  call.set_offsets({1, 2, 4});
  bad = find();
  CHECK((bad.found && bad.sequence == 0 && bad.kind == 1));  // not from 0
}

TEST_CASE("the backward names the forward-only members and a missing lse, writing nothing") {
  PagedCall call;
  // The gradients' views reuse o's poisoned buffer: every call below is refused before any
  // write, which outputs_untouched() then shows.
  const auto check_backward = [&](const std::string& argument, const std::string& words) {
    check_rejected(
        call,
        [&] {
          emulator().backward(call.attention, call.sequences, call.q, call.k, call.v, call.o,
                              call.lse, call.q, call.o, call.k, call.v);
        },
        argument, words);
  };
  check_backward("sequences.page_table", "forward-only");
  call.sequences.page_table = {};
  call.sequences.seqlens_k = {};  // (the backward takes it: the used keys)
  call.sequences.splits = 2;
  check_backward("sequences.splits", "forward-only");
  call.sequences.splits = 0;
  call.lse = {};
  check_backward("lse", "required");
}

TEST_CASE("an explicit config (the autotuner's) must have the call's layout and dtype") {
  PagedCall call;
  detail::RuntimeBackend& backend = detail::RuntimeParts::backend(emulator());
  const DeviceInfo& device = emulator().device();
  const kernels::CacheLayout layout{true, kPageSize};
  const kernels::InferenceConfig good = kernels::default_inference_config(
      call.attention, layout, DType::bf16, device.arch(), device.sm_count, 2);
  const auto check_config = [&](const kernels::InferenceConfig& config, const std::string& words) {
    check_rejected(
        call,
        [&] {
          kernels::attention_forward_sequences(backend, call.attention, call.sequences, call.q,
                                               call.k, call.v, call.o, call.lse, config, false,
                                               nullptr);
        },
        "config", words);
  };
  kernels::InferenceConfig bad = good;
  bad.forward.paged = false;  // a dense cache's kernel on pages
  check_config(bad, "layout flags");
  bad = good;
  bad.splits = 1;  // the split kernel without splits
  check_config(bad, "layout flags");
  bad = good;
  bad.splits = kernels::kMaxSplits + 1;
  check_config(bad, "splits");
  bad = kernels::default_inference_config(call.attention, layout, DType::f16, device.arch(),
                                          device.sm_count, 2);
  check_config(bad, "dtype");
  // The good one runs and writes.
  kernels::attention_forward_sequences(backend, call.attention, call.sequences, call.q, call.k,
                                       call.v, call.o, call.lse, good, false, nullptr);
  CHECK_FALSE(call.outputs_untouched());
}

}  // namespace flashjit::testing
