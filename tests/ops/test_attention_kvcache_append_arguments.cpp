// Bad input to an appending inference forward (Sequences::k_new, v_new, rotary tables) on the
// emulator: each is an InvalidArgument naming the argument, thrown before anything is launched,
// and neither the outputs nor the cache change.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/inference/attention_inference.hpp"
#include "flashjit/error.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

constexpr std::int64_t kBatch = 2, kHeadsQ = 8, kHeadsKv = 2, kHeadDim = 64, kCapacity = 16;

/// A valid decoding call appending one key to a dense cache of 16 keys a sequence (3 and 15
/// cached), with rotary tables; each test breaks one thing.
struct AppendCall {
  DeviceBuffer q_buf, cache_k, cache_v, new_k, new_v, o_buf, lse_buf, lens_buf, cos_buf, sin_buf;
  Attention attention;
  Sequences sequences;
  TensorView q, k, v, o, lse;

  AppendCall() {
    const auto buffer = filled_buffer;
    const std::size_t q_bytes = kBatch * kHeadsQ * kHeadDim * 2;
    const std::size_t cache_bytes = kBatch * kCapacity * kHeadsKv * kHeadDim * 2;
    q_buf = buffer(q_bytes, 0);
    cache_k = buffer(cache_bytes, 0x11);
    cache_v = buffer(cache_bytes, 0x11);
    new_k = buffer(kBatch * kHeadsKv * kHeadDim * 2, 0);
    new_v = buffer(kBatch * kHeadsKv * kHeadDim * 2, 0);
    o_buf = buffer(q_bytes, 0x7f);
    lse_buf = buffer(kBatch * kHeadsQ * 4, 0x7f);
    cos_buf = buffer(kCapacity * kHeadDim / 2 * 4, 0);
    sin_buf = buffer(kCapacity * kHeadDim / 2 * 4, 0);
    lens_buf = emulator().allocate(kBatch * 4);
    set_lengths({3, 15});
    attention = {.batch = kBatch,
                 .heads_q = kHeadsQ,
                 .heads_kv = kHeadsKv,
                 .seqlen_q = 1,
                 .seqlen_k = kCapacity,
                 .head_dim = kHeadDim};
    q = TensorView::contiguous(q_buf.data(), DType::bf16, {kBatch, 1, kHeadsQ, kHeadDim});
    o = TensorView::contiguous(o_buf.data(), DType::bf16, {kBatch, 1, kHeadsQ, kHeadDim});
    lse = TensorView::contiguous(lse_buf.data(), DType::f32, {kBatch, kHeadsQ, 1});
    k = cache_view(cache_k);
    v = cache_view(cache_v);
    sequences.seqlens_k = TensorView::contiguous(lens_buf.data(), DType::i32, {kBatch});
    sequences.k_new = new_view(new_k);
    sequences.v_new = new_view(new_v);
    sequences.rotary_cos = table_view(cos_buf, DType::f32, kCapacity, kHeadDim / 2);
    sequences.rotary_sin = table_view(sin_buf, DType::f32, kCapacity, kHeadDim / 2);
  }

  static TensorView cache_view(const DeviceBuffer& b) {
    return TensorView::contiguous(b.data(), DType::bf16, {kBatch, kCapacity, kHeadsKv, kHeadDim});
  }
  static TensorView new_view(const DeviceBuffer& b, std::int64_t rows = 1) {
    return TensorView::contiguous(b.data(), DType::bf16, {kBatch, rows, kHeadsKv, kHeadDim});
  }
  static TensorView table_view(const DeviceBuffer& b, DType dtype, std::int64_t positions,
                               std::int64_t pairs) {
    return TensorView::contiguous(b.data(), dtype, {positions, pairs});
  }

  void set_lengths(const std::vector<std::int32_t>& l) {
    emulator().copy_to_device(lens_buf.data(), l.data(), l.size() * 4);
  }

  void run() { emulator().forward(attention, sequences, q, k, v, o, lse); }

  /// Whether o and lse keep their 0x7f fill and the cache its 0x11.
  bool untouched() const {
    return holds_only(o_buf, 0x7f) && holds_only(lse_buf, 0x7f) && holds_only(cache_k, 0x11) &&
           holds_only(cache_v, 0x11);
  }
};

/// The call's forward throws InvalidArgument naming `argument` with `words` in its message,
/// and nothing was written.
void check_rejected(AppendCall& call, const std::string& argument, const std::string& words) {
  try {
    call.run();
    FAIL("accepted; expected InvalidArgument(" << argument << ")");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == argument);
    const std::string message = e.what();
    CHECK_MESSAGE(message.find(words) != std::string::npos, message);
  }
  CHECK(call.untouched());
}

}  // namespace

TEST_CASE("the valid appending call writes its outputs and the cache") {
  AppendCall call;
  call.run();
  CHECK_FALSE(call.untouched());
}

TEST_CASE("an append past the cache's capacity is named with the sequence's count") {
  AppendCall call;
  call.set_lengths({3, 16});  // 16 cached + 1 new: the cache holds 16
  check_rejected(call, "sequences.seqlens_k", "position 1 holds 16; must be from 0 to 15");
  call.set_lengths({-1, 3});
  check_rejected(call, "sequences.seqlens_k", "position 0 holds -1");
}

TEST_CASE("half an append, or rotary without one, is named") {
  AppendCall call;
  call.sequences.v_new = {};
  check_rejected(call, "sequences.v_new", "come together");
  call.sequences.k_new = {};
  check_rejected(call, "sequences.rotary_cos", "needs sequences.k_new");
  call.sequences.k_new = AppendCall::new_view(call.new_k);
  call.sequences.v_new = AppendCall::new_view(call.new_v);
  call.sequences.rotary_sin = {};
  check_rejected(call, "sequences.rotary_sin", "come together");
}

TEST_CASE("an append needs seqlens_k, where each sequence's new keys go") {
  AppendCall call;
  call.sequences.seqlens_k = {};
  check_rejected(call, "sequences.seqlens_k", "required with k_new");
}

TEST_CASE("new keys of the wrong shape or dtype are named") {
  AppendCall call;
  call.sequences.k_new = AppendCall::new_view(call.new_k, 17);
  check_rejected(call, "sequences.k_new.shape", "more than the cache holds");
  call.sequences.k_new =
      TensorView::contiguous(call.new_k.data(), DType::bf16, {kBatch, 1, kHeadsKv + 1, kHeadDim});
  check_rejected(call, "sequences.k_new.shape", "");
  call.sequences.k_new = AppendCall::new_view(call.new_k);
  call.sequences.v_new =
      TensorView::contiguous(call.new_v.data(), DType::f16, {kBatch, 1, kHeadsKv, kHeadDim});
  check_rejected(call, "sequences.v_new.dtype", "");
}

TEST_CASE("rotary tables of the wrong dtype, width or length are named") {
  AppendCall call;
  call.sequences.rotary_cos = AppendCall::table_view(call.cos_buf, DType::f16, kCapacity, 32);
  check_rejected(call, "sequences.rotary_cos.dtype", "must be fp32");
  call.sequences.rotary_cos = AppendCall::table_view(call.cos_buf, DType::f32, kCapacity, 33);
  check_rejected(call, "sequences.rotary_cos.shape", "from 1 to 32");
  call.sequences.rotary_cos = AppendCall::table_view(call.cos_buf, DType::f32, kCapacity - 1, 32);
  check_rejected(call, "sequences.rotary_cos.shape", "must cover attention.seqlen_k = 16");
  call.sequences.rotary_cos = AppendCall::table_view(call.cos_buf, DType::f32, kCapacity, 16);
  check_rejected(call, "sequences.rotary_sin.shape", "");
}

TEST_CASE("a causal call with rotary whose queries pass the tables' positions is named") {
  AppendCall call;
  call.attention.causal = true;
  // 2 queries, 1 new key: query 1 of sequence 1 sits at 15 + 1 = 16, past the 16 positions
  // (FlashAttention's rule: query i at the cached count + i).
  call.attention.seqlen_q = 2;
  const std::size_t bytes = kBatch * 2 * kHeadsQ * kHeadDim * 2;
  call.q_buf = filled_buffer(bytes, 0);
  call.o_buf = filled_buffer(bytes, 0x7f);
  call.q = TensorView::contiguous(call.q_buf.data(), DType::bf16, {kBatch, 2, kHeadsQ, kHeadDim});
  call.o = TensorView::contiguous(call.o_buf.data(), DType::bf16, {kBatch, 2, kHeadsQ, kHeadDim});
  call.lse = {};
  check_rejected(call, "sequences.rotary_cos.shape",
                 "has 16 positions; sequence 1 rotates rows up to position seqlens_k[1] + 1 = 16");
}

TEST_CASE("cache rows and left pads out of range, shared by appends, or with packed keys") {
  AppendCall call;
  DeviceBuffer index = emulator().allocate(kBatch * 4);
  const auto set_index = [&](std::vector<std::int32_t> values) {
    emulator().copy_to_device(index.data(), values.data(), values.size() * 4);
  };
  const TensorView index_view = TensorView::contiguous(index.data(), DType::i32, {kBatch});
  call.sequences.cache_batch_idx = index_view;
  set_index({1, 2});  // the cache has rows 0 and 1
  check_rejected(call, "sequences.cache_batch_idx", "position 1 holds 2");
  set_index({1, 1});  // both sequences would append into row 1
  check_rejected(call, "sequences.cache_batch_idx", "positions 0 and 1 both hold 1");
  set_index({1, 0});
  call.sequences.cu_seqlens_k = index_view;
  check_rejected(call, "sequences.cache_batch_idx", "absent with cu_seqlens_k");
  call.sequences.cu_seqlens_k = {};
  call.sequences.cache_batch_idx = {};
  call.sequences.cache_leftpad = index_view;
  set_index({0, 16});  // sequence 1 has 15 keys
  check_rejected(call, "sequences.cache_leftpad", "position 1 holds 16");
  call.sequences.seqlens_k = {};
  call.sequences.k_new = call.sequences.v_new = {};
  call.sequences.rotary_cos = call.sequences.rotary_sin = {};
  check_rejected(call, "sequences.seqlens_k", "required with cache_leftpad");
}

TEST_CASE("the device-side index check (a GPU's check_indices) finds rows, pads and appends") {
  AppendCall call;
  detail::RuntimeBackend& backend = detail::RuntimeParts::backend(emulator());
  DeviceBuffer rows = emulator().allocate(kBatch * 4), pads = emulator().allocate(kBatch * 4);
  const auto set = [&](DeviceBuffer& b, std::vector<std::int32_t> values) {
    emulator().copy_to_device(b.data(), values.data(), values.size() * 4);
  };
  set(rows, {1, 0});
  set(pads, {0, 15});
  call.sequences.cache_batch_idx = TensorView::contiguous(rows.data(), DType::i32, {kBatch});
  call.sequences.cache_leftpad = TensorView::contiguous(pads.data(), DType::i32, {kBatch});
  const auto find = [&] {
    const kernels::InferenceTensors t = kernels::validate_inference_arguments(
        call.attention, call.sequences, call.q, call.k, call.v, call.o, call.lse);
    return kernels::find_index_violation(backend, call.attention, call.sequences, t, nullptr);
  };
  CHECK_FALSE(find().found);
  set(rows, {1, 2});
  kernels::IndexViolationFound bad = find();
  CHECK((bad.found && bad.sequence == 1 && bad.kind == 5));  // cache_batch_idx
  set(rows, {0, 0});                                         // one row for two appending sequences
  bad = find();
  CHECK((bad.found && bad.sequence == 1 && bad.kind == 5));
  set(rows, {1, 0});
  set(pads, {4, 0});  // sequence 0 has 3 keys
  bad = find();
  CHECK((bad.found && bad.sequence == 0 && bad.kind == 6));  // cache_leftpad
  set(pads, {0, 0});
  call.set_lengths({3, 16});  // 16 + 1 appended: past the cache
  bad = find();
  CHECK((bad.found && bad.sequence == 1 && bad.kind == 3));  // seqlens_k
}

TEST_CASE("a cache that overlaps another tensor of the call is named") {
  AppendCall call;
  // v the very view k is: the append would write each new row twice, once as a key and once
  // as a value (named as an append into a latent cache, v being k's first columns).
  call.v = AppendCall::cache_view(call.cache_k);
  check_rejected(call, "sequences.v_new", "k's first columns");
  // v over k's bytes from its second key row on (its own extent is never read): both are written.
  call.v = AppendCall::cache_view(call.cache_k);
  call.v.data = static_cast<std::uint16_t*>(call.v.data) + kHeadsKv * kHeadDim;
  check_rejected(call, "k", "output 'v'");
  call.v = AppendCall::cache_view(call.cache_v);
  call.sequences.k_new =
      TensorView::contiguous(call.cache_k.data(), DType::bf16, {kBatch, 1, kHeadsKv, kHeadDim});
  try {
    call.run();
    FAIL("accepted a k_new inside the cache");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == "k");
    CHECK(std::string(e.what()).find("input 'sequences.k_new'") != std::string::npos);
  }
}

}  // namespace flashjit::testing
