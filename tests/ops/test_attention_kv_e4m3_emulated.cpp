// fp8 e4m3 KV caches in the inference forward (Sequences::k_descale, v_descale) on the CPU
// emulator: the e4m3 conversions against the format's definition; decoding and prefill over
// dense, packed and paged caches (one token a page included), each descale shape, both query
// dtypes, against the float64 attention over the dequantized cache with the dtype's bound;
// sm_90a's packed prefill on the TMA kernel (its producer warpgroup converting the staged
// blocks) and its tiles' shared memory; decoding's global bytes on the fp8
// bytes; and bad input named before anything is written.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "attention/check/inference_case.hpp"
#include "attention/inference/attention_inference_config.hpp"
#include "attention/inference/decode_tuning.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/error.hpp"
#include "support/emulator_runtime.hpp"
#include "tile/numeric.cuh"

namespace flashjit::testing {
namespace {

/// e4m3's value by its definition: sign, 4 exponent bits of bias 7, 3 mantissa bits,
/// subnormals at exponent 0.
double e4m3_by_definition(unsigned code) {
  const int exponent = static_cast<int>(code >> 3 & 0xF), mantissa = static_cast<int>(code & 7);
  const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, -6)
                                         : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

void check_case(Runtime& runtime, const InferenceCase& c) {
  INFO(c.name());
  const InferenceVerdict verdict = run_inference_case(runtime, c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

/// Whether a kernel whose name contains `part` ran since the runtime's work was last reset.
bool ran(Runtime& runtime, const std::string& part) {
  for (const KernelWork& kernel : runtime.emulated_work()) {
    if (kernel.kernel.find(part) != std::string::npos) return true;
  }
  return false;
}

/// Runs `c` (packed queries and keys over an fp8 cache) on the emulated sm_90a, unsplit (a
/// batch this small would otherwise split its keys, which only mma.sync does), and checks that
/// the TMA kernel ran it.
void check_tma_prefill(InferenceCase c) {
  c.keys = KeyStorage::packed;
  c.packed_q = true;
  c.kv_e4m3 = true;
  c.splits = 1;
  hopper_emulator().reset_emulated_work();
  check_case(hopper_emulator(), c);
  CHECK(ran(hopper_emulator(), ".tma."));
  CHECK(ran(hopper_emulator(), ".kv_e4m3"));
}

}  // namespace

TEST_CASE("e4m3: every code reads as its definition, and rounding to it is to nearest even") {
  for (unsigned code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;  // NaN
    const double value = e4m3_by_definition(code);
    CHECK_MESSAGE(float_from_e4m3_bits(static_cast<std::uint8_t>(code)) == value, code);
    // Every value rounds to itself (-0 to 0x80, +0 to 0x00).
    CHECK_MESSAGE(e4m3_bits_from_float(static_cast<float>(value)) == code, code);
  }
  CHECK(float_from_e4m3_bits(0x7F) == 480.0f);   // the NaN pattern, as the kernels read it
  CHECK(e4m3_bits_from_float(1000.0f) == 0x7E);  // saturates at 448
  CHECK(e4m3_bits_from_float(-1e30f) == 0xFE);
  CHECK(e4m3_bits_from_float(NAN) == 0x7F);
  CHECK(e4m3_bits_from_float(INFINITY) == 0x7E);  // no infinity in e4m3: saturates too
  CHECK(e4m3_bits_from_float(-INFINITY) == 0xFE);
  CHECK(e4m3_bits_from_float(1.0625f) == 0x38);  // halfway between 1 and 1.125: to even
  CHECK(e4m3_bits_from_float(1.1875f) == 0x3A);  // halfway between 1.125 and 1.25: to even
  CHECK(e4m3_bits_from_float(std::ldexp(1.5f, -9)) == 0x02);   // halfway subnormal: to even
  CHECK(e4m3_bits_from_float(std::ldexp(1.0f, -11)) == 0x00);  // below half the least
}

TEST_CASE("e4m3: the kernels' rounding (tile/numeric.cuh) is the library's, bit for bit") {
  // The append kernel rounds new rows with e4m3_from_float (integer arithmetic on the float's
  // bits, the same on every backend); the library's e4m3_bits_from_float is the reference.
  // Every code's value, each midpoint between neighbours, one float either side of it, and
  // a million random floats over e4m3's range and past it.
  std::vector<float> values = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-30f, 464.0f, 465.0f};
  for (unsigned code = 0; code < 0x7F; ++code) {
    const double value = e4m3_by_definition(code), next = e4m3_by_definition(code + 1);
    for (double x : {value, (value + next) / 2}) {
      for (float f : {static_cast<float>(x), std::nextafter(static_cast<float>(x), 0.0f),
                      std::nextafter(static_cast<float>(x), 1e9f)}) {
        values.push_back(f);
        values.push_back(-f);
      }
    }
  }
  std::uint32_t state = 12345;
  for (int i = 0; i < 1000000; ++i) {
    state = state * 1664525u + 1013904223u;
    const float unit = static_cast<float>(state >> 8) / static_cast<float>(1 << 24);  // [0, 1)
    values.push_back((state & 1 ? -1.0f : 1.0f) * std::ldexp(unit + 0.5f, int(state % 24) - 13));
  }
  int mismatches = 0;
  for (float f : values) {
    if (e4m3_from_float(f) != e4m3_bits_from_float(f) && ++mismatches <= 5) {
      FAIL_CHECK("e4m3_from_float(" << f << ") = " << e4m3_from_float(f) << ", the library's "
                                    << int(e4m3_bits_from_float(f)));
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("e4m3 cache: decoding on pages of 1 and 16 keys, GQA, split and not, both dtypes") {
  for (std::int64_t page_size : {1, 16}) {
    InferenceCase c;
    c.seqlens_q.assign(3, 1);
    c.seqlens_k = {1, 300, 77};
    c.heads_q = 8;
    c.heads_kv = 2;
    c.keys = KeyStorage::paged;
    c.page_size = page_size;
    c.kv_e4m3 = true;
    c.splits = page_size == 1 ? 3 : 1;
    c.dtype = page_size == 1 ? DType::bf16 : DType::f16;
    c.seed = static_cast<std::uint64_t>(70 + page_size);
    emulator().reset_emulated_work();
    check_case(emulator(), c);
    CHECK(ran(emulator(), ".kv_e4m3"));
  }
}

TEST_CASE("e4m3 cache: each descale shape, dense and packed keys, causal prefill chunks") {
  using Descale = InferenceCase::Descale;
  for (Descale descale : {Descale::per_tensor, Descale::per_head, Descale::per_sequence}) {
    InferenceCase c;
    c.seqlens_q = {20, 20};
    c.seqlens_k = {90, 40};
    c.heads_q = 4;
    c.heads_kv = descale == Descale::per_tensor ? 1 : 2;
    c.head_dim = descale == Descale::per_head ? 128 : 64;
    c.causal = descale != Descale::per_tensor;
    c.keys = descale == Descale::per_sequence ? KeyStorage::packed : KeyStorage::dense;
    c.packed_q = descale == Descale::per_sequence;
    c.kv_e4m3 = true;
    c.descale = descale;
    c.seed = 90 + static_cast<std::uint64_t>(descale);
    check_case(emulator(), c);
  }
}

TEST_CASE("e4m3 cache on sm_90a: packed prefill runs the TMA kernel, its producer converting") {
  SUBCASE("head dim 128, head_dim_v 64, GQA, causal, spare rows past the last sequence") {
    InferenceCase c = random_lengths_case(3, 40, 150, 11);
    c.seqlens_q[2] = 70;   // (GQA decoding, the longest under 64 queries, packs heads instead)
    c.seqlens_k[2] = 300;  // 3 key blocks: the producer converts into ring slots read before
    c.heads_q = 4;
    c.heads_kv = 2;
    c.head_dim = 128;
    c.head_dim_v = 64;
    c.causal = true;
    c.spare_rows = 24;
    check_tma_prefill(c);
  }
  SUBCASE("head dim 64, fp16, each sequence's factors, window and softcap") {
    InferenceCase c = random_lengths_case(2, 70, 200, 12);
    c.seqlens_k[1] = 330;
    c.heads_q = 2;
    c.heads_kv = 2;
    c.window_left = 50;
    c.softcap = 20;
    c.dtype = DType::f16;
    c.descale = InferenceCase::Descale::per_sequence;
    check_tma_prefill(c);
  }
}

TEST_CASE("e4m3 cache on sm_90a: the TMA prefill's tiles leave shared memory for staging") {
  for (int head_dim : {64, 128, 256}) {
    INFO("head dim " << head_dim);
    const std::optional<kernels::ForwardConfig> config = kernels::packed_prefill_tma_config(
        DType::bf16, head_dim, MaskKind::none, false, "sm_90a", /*kv_e4m3=*/true);
    REQUIRE(config.has_value());
    CHECK(config->kv_e4m3);
    CHECK(config->shared_bytes() <= 227 * 1024);
    const std::optional<kernels::ForwardConfig> plain =
        kernels::packed_prefill_tma_config(DType::bf16, head_dim, MaskKind::none, false, "sm_90a");
    REQUIRE(plain.has_value());
    // The widest key block that fits: the 16-bit default's where that leaves room, never
    // narrower than 64 keys, the query block kept.
    CHECK(config->block_n <= plain->block_n);
    CHECK(config->block_n >= 64);
    CHECK(config->block_m == plain->block_m);
  }
  CHECK_FALSE(
      kernels::packed_prefill_tma_config(DType::bf16, 128, MaskKind::none, false, "sm_80", true));
}

TEST_CASE("e4m3 cache: decoding reads the cache's fp8 bytes once: batch 8, context 4096") {
  InferenceCase c = paged_decode_case(8, 4096);
  c.kv_e4m3 = true;
  emulator().reset_emulated_work();
  check_case(emulator(), c);
  double bytes = 0;  // every kernel of the call: the split forward and the merge
  for (const KernelWork& kernel : emulator().emulated_work()) {
    bytes += double(kernel.work.global_bytes_read + kernel.work.global_bytes_written);
  }
  const double cache = 2.0 * 8 * 4096 * 4 * 128;  // keys and values, one byte each
  const double q_and_o = 2.0 * 8 * 32 * 128 * 2, lse = 8 * 32 * 4;
  const double minimum = cache + q_and_o + lse;
  INFO("global bytes " << bytes << ", minimum " << minimum);
  CHECK(bytes / minimum <= 1.1);
  CHECK(bytes / minimum >= 1.0);
}

TEST_CASE("e4m3 cache: decoding's tuning key and space are the fp8 cache's own") {
  Attention a{
      .batch = 8, .heads_q = 32, .heads_kv = 4, .seqlen_q = 1, .seqlen_k = 4096, .head_dim = 128};
  const kernels::DecodeProblem bf16(DType::bf16, a, kernels::CacheLayout{true, 16});
  const kernels::DecodeProblem fp8(DType::bf16, a, kernels::CacheLayout{true, 16, true});
  CHECK(fp8.key() != bf16.key());
  CHECK(fp8.key().find("/paged16-e4m3/") != std::string::npos);
  CHECK(fp8.shape_fields() != bf16.shape_fields());
  std::set<std::string> names;
  for (const autotune::TunedConfig& config : fp8.space()) {
    const kernels::InferenceConfig& c = config.get<kernels::InferenceConfig>();
    CHECK(c.forward.kv_e4m3);
    // The mma.sync kernel's fp8 staging ring has two slots; the decode kernel's rings any.
    if (c.forward.path() == kernels::ForwardPath::mma_sync) CHECK(c.forward.stages == 2);
    names.insert(config.name());
  }
  CHECK(names.size() == fp8.space().size());  // no twins
  const kernels::ForwardConfig chosen =
      fp8.default_config("sm_80").get<kernels::InferenceConfig>().forward;
  CHECK(chosen.kv_e4m3);
  CHECK(chosen.path() == kernels::ForwardPath::decode);  // the decode kernel reads fp8 too
  CHECK(fp8.bytes() * 2 == bf16.bytes());
}

namespace {

constexpr std::int64_t kBatch = 2, kHeadsQ = 4, kHeadsKv = 2, kHeadDim = 64, kCapacity = 32;

/// A valid decoding call on a dense e4m3 cache with per-head descales; each test breaks one
/// thing.
struct E4m3Call {
  DeviceBuffer q_buf, cache_k, cache_v, o_buf, lse_buf, k_scale, v_scale, new_kv;
  Attention attention{.batch = kBatch,
                      .heads_q = kHeadsQ,
                      .heads_kv = kHeadsKv,
                      .seqlen_q = 1,
                      .seqlen_k = kCapacity,
                      .head_dim = kHeadDim};
  Sequences sequences;
  TensorView q, k, v, o, lse;

  E4m3Call() {
    const std::size_t q_bytes = kBatch * kHeadsQ * kHeadDim * 2;
    const std::size_t cache_bytes = kBatch * kCapacity * kHeadsKv * kHeadDim;
    q_buf = filled_buffer(q_bytes, 0);
    cache_k = filled_buffer(cache_bytes, 0x11);
    cache_v = filled_buffer(cache_bytes, 0x11);
    o_buf = filled_buffer(q_bytes, 0x7f);
    lse_buf = filled_buffer(kBatch * kHeadsQ * 4, 0x7f);
    k_scale = filled_buffer(kBatch * kHeadsKv * 4, 0);
    v_scale = filled_buffer(kBatch * kHeadsKv * 4, 0);
    new_kv = filled_buffer(kBatch * kHeadsKv * kHeadDim * 2, 0);
    q = TensorView::contiguous(q_buf.data(), DType::bf16, {kBatch, 1, kHeadsQ, kHeadDim});
    o = TensorView::contiguous(o_buf.data(), DType::bf16, {kBatch, 1, kHeadsQ, kHeadDim});
    lse = TensorView::contiguous(lse_buf.data(), DType::f32, {kBatch, kHeadsQ, 1});
    k = cache_view(cache_k, DType::e4m3);
    v = cache_view(cache_v, DType::e4m3);
    sequences.k_descale = TensorView::contiguous(k_scale.data(), DType::f32, {kHeadsKv});
    sequences.v_descale = TensorView::contiguous(v_scale.data(), DType::f32, {kHeadsKv});
  }

  static TensorView cache_view(const DeviceBuffer& b, DType dtype) {
    return TensorView::contiguous(b.data(), dtype, {kBatch, kCapacity, kHeadsKv, kHeadDim});
  }

  bool untouched() const {
    return holds_only(o_buf, 0x7f) && holds_only(lse_buf, 0x7f) && holds_only(cache_k, 0x11) &&
           holds_only(cache_v, 0x11);
  }
};

/// Runs the call and checks it throws InvalidArgument naming `argument` and writes nothing.
void check_refused(E4m3Call& call, const std::string& argument) {
  try {
    emulator().forward(call.attention, call.sequences, call.q, call.k, call.v, call.o, call.lse);
    FAIL("accepted; expected an error naming " << argument);
  } catch (const InvalidArgument& error) {
    CHECK_MESSAGE(error.argument() == argument, error.what());
  }
  CHECK(call.untouched());
}

}  // namespace

TEST_CASE("e4m3 cache: bad input is named before anything is written") {
  {
    E4m3Call call;  // the valid call runs (all-zero scales: O is 0)
    emulator().forward(call.attention, call.sequences, call.q, call.k, call.v, call.o, call.lse);
    CHECK_FALSE(holds_only(call.o_buf, 0x7f));
  }
  {
    E4m3Call call;
    call.sequences.k_descale =
        TensorView::contiguous(call.k_scale.data(), DType::f32, {kHeadsKv + 1});
    check_refused(call, "sequences.k_descale.shape");
  }
  {
    E4m3Call call;
    call.sequences.v_descale =
        TensorView::contiguous(call.v_scale.data(), DType::bf16, {kBatch, kHeadsKv});
    check_refused(call, "sequences.v_descale.dtype");
  }
  {
    E4m3Call call;
    call.v = E4m3Call::cache_view(call.cache_v, DType::bf16);
    check_refused(call, "v.dtype");
  }
  {
    E4m3Call call;  // descales with a 16-bit cache (half the keys in the same bytes)
    call.attention.seqlen_k = kCapacity / 2;
    call.k = TensorView::contiguous(call.cache_k.data(), DType::bf16,
                                    {kBatch, kCapacity / 2, kHeadsKv, kHeadDim});
    call.v = TensorView::contiguous(call.cache_v.data(), DType::bf16,
                                    {kBatch, kCapacity / 2, kHeadsKv, kHeadDim});
    check_refused(call, "sequences.k_descale");
  }
  {
    E4m3Call call;  // an append into an fp8 cache takes e4m3 codes, not q's 16-bit values
    const std::vector<std::int32_t> cached(kBatch, 0);
    DeviceBuffer lengths = emulator().allocate(kBatch * 4);
    emulator().copy_to_device(lengths.data(), cached.data(), kBatch * 4);
    call.sequences.seqlens_k = TensorView::contiguous(lengths.data(), DType::i32, {kBatch});
    const TensorView fresh =
        TensorView::contiguous(call.new_kv.data(), DType::bf16, {kBatch, 1, kHeadsKv, kHeadDim});
    call.sequences.k_new = fresh;
    call.sequences.v_new = fresh;
    check_refused(call, "sequences.k_new.dtype");
  }
  {
    E4m3Call call;  // 16 fp8 values a copy: head dim 72 cannot be read in whole copies
    call.attention.head_dim = 72;
    call.q = TensorView::contiguous(call.q_buf.data(), DType::bf16, {kBatch, 1, kHeadsQ / 2, 72});
    call.attention.heads_q = kHeadsQ / 2;
    call.o = TensorView::contiguous(call.o_buf.data(), DType::bf16, {kBatch, 1, kHeadsQ / 2, 72});
    call.k = TensorView::contiguous(call.cache_k.data(), DType::e4m3, {kBatch, 16, kHeadsKv, 72});
    call.v = TensorView::contiguous(call.cache_v.data(), DType::e4m3, {kBatch, 16, kHeadsKv, 72});
    call.attention.seqlen_k = 16;
    call.lse = TensorView::contiguous(call.lse_buf.data(), DType::f32, {kBatch, kHeadsQ / 2, 1});
    check_refused(call, "attention.head_dim");
  }
  {
    E4m3Call call;  // a row stride of 8 fp8 elements: not a whole 16-byte copy
    call.k = TensorView::strided(call.cache_k.data(), DType::e4m3, {kBatch, kCapacity, 1, kHeadDim},
                                 {kCapacity * 72, 72, 72, 1});
    call.attention.heads_kv = 1;
    call.v =
        TensorView::contiguous(call.cache_v.data(), DType::e4m3, {kBatch, kCapacity, 1, kHeadDim});
    call.sequences.k_descale = {};
    call.sequences.v_descale = {};
    check_refused(call, "k.strides");
  }
}

TEST_CASE("e4m3 cache: the backward and the dense forward refuse it by name") {
  E4m3Call call;
  try {
    emulator().forward(call.attention, call.q, call.k, call.v, call.o, call.lse);
    FAIL("the dense forward accepted an e4m3 k");
  } catch (const InvalidArgument& error) {
    CHECK(error.argument() == "k.dtype");
  }
  CHECK(call.untouched());
  const Sequences no_descale;  // (descales in the backward are refused as forward-only first)
  try {
    emulator().backward(call.attention, no_descale, call.q, call.k, call.v, call.o, call.lse,
                        call.q, call.o, call.k, call.v);
    FAIL("the backward accepted an e4m3 k");
  } catch (const InvalidArgument& error) {
    CHECK(error.argument() == "k.dtype");
  }
  CHECK(call.untouched());
}

}  // namespace flashjit::testing
