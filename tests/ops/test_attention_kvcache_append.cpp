// Appending to the KV cache in the inference forward (Sequences::k_new, v_new, rotary tables) on
// the CPU emulator: each sequence's O and LSE against its float64 reference over the grown cache
// (q and the new keys rotated in float64), and the cache read back (the new rows written, rotated,
// every other row untouched); pages down to one token; decoding's global bytes with an append and
// rotary within 1.1x the minimum; and bad input named before anything is written.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attention/check/inference_case.hpp"
#include "flashjit/error.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

void check_case(const InferenceCase& c) {
  INFO(c.name());
  const InferenceVerdict verdict = run_inference_case(emulator(), c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

}  // namespace

TEST_CASE("pages below 16 keys, one token a page included, lengths ending mid-page") {
  for (std::int64_t page_size : {1, 3, 5}) {
    InferenceCase c{.seqlens_q = {2, 2, 2}, .seqlens_k = {1, 37, 2 * page_size + 1}};
    c.keys = KeyStorage::paged;
    c.page_size = page_size;
    c.heads_q = 8;
    c.heads_kv = 2;
    c.causal = page_size != 3;
    c.seed = static_cast<std::uint64_t>(40 + page_size);
    check_case(c);
  }
}

TEST_CASE("appending to a dense and a paged cache, decoding and a chunk, the cache read back") {
  for (KeyStorage keys : {KeyStorage::dense, KeyStorage::paged}) {
    for (std::int64_t append : {1, 7}) {
      // Decoding appends the query's own key; a chunk of 7 queries appends 7.
      InferenceCase c{.seqlens_q = {append, append}, .seqlens_k = {append, 50}};
      c.keys = keys;
      c.page_size = keys == KeyStorage::paged ? 4 : 16;
      c.append = append;
      c.heads_q = 8;
      c.heads_kv = 2;
      c.causal = append > 1;
      c.seed = static_cast<std::uint64_t>(60 + append);
      check_case(c);
    }
  }
}

TEST_CASE("rotary: both pairings, a partial rotary dim, causal positions advancing, fp16") {
  struct Row {
    bool interleaved;
    std::int64_t rotary_dim;  // 0: the whole head
    bool causal;
    DType dtype;
    std::int64_t head_dim;
  };
  for (const Row& row :
       {Row{false, 0, true, DType::bf16, 64}, Row{true, 0, false, DType::bf16, 64},
        Row{false, 32, false, DType::f16, 128}, Row{true, 16, true, DType::f16, 80}}) {
    InferenceCase c{.seqlens_q = {3, 3, 3}, .seqlens_k = {3, 20, 91}};
    c.keys = row.causal ? KeyStorage::paged : KeyStorage::dense;
    c.page_size = 1;
    c.append = 3;
    c.rotary = true;
    c.rotary_interleaved = row.interleaved;
    c.rotary_dim = row.rotary_dim;
    c.causal = row.causal;
    c.dtype = row.dtype;
    c.head_dim = row.head_dim;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seed = static_cast<std::uint64_t>(row.head_dim + row.rotary_dim);
    check_case(c);
  }
}

TEST_CASE("appending with a value head dim below head_dim (MLA's 192 and 128), dense, fp16") {
  InferenceCase c{.seqlens_q = {1, 1}, .seqlens_k = {5, 60}};
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim = 192;
  c.head_dim_v = 128;
  c.append = 2;
  c.dtype = DType::f16;
  c.seed = 61;
  check_case(c);
}

TEST_CASE("cache rows and left pads (cache_batch_idx, cache_leftpad), with appends and rotary") {
  for (int variant = 0; variant < 4; ++variant) {
    // Sequences in reversed cache rows after a spare one, their keys after NaN padding.
    InferenceCase c{.seqlens_q = {2, 2, 2}, .seqlens_k = {2, 30, 11}};
    c.leftpad = {5, 0, 17};
    c.cache_batch_idx = variant != 1;
    c.append = variant >= 2 ? 2 : 0;
    c.rotary = variant == 3;
    c.causal = variant % 2 == 0;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seed = static_cast<std::uint64_t>(80 + variant);
    check_case(c);
  }
}

TEST_CASE("rotary with a causal or local mask and more queries than new keys (FlashAttention's)") {
  // Query i sits at the cached count + i, past the new keys for i >= append; the rotary tables
  // reach that far (the case's tables cover every query's position).
  for (int variant = 0; variant < 3; ++variant) {
    InferenceCase c{.seqlens_q = {5, 5, 5}, .seqlens_k = {2, 30, 11}};
    c.keys = variant == 1 ? KeyStorage::paged : KeyStorage::dense;
    c.page_size = 4;
    c.append = variant == 2 ? 1 : 2;
    c.rotary = true;
    c.rotary_interleaved = variant == 1;
    c.causal = variant != 2;
    c.window_left = variant == 2 ? 6 : -1;  // local: a window, not causal
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seed = static_cast<std::uint64_t>(100 + variant);
    check_case(c);
  }
}

TEST_CASE("cache rows and left pads over a paged cache (FlashAttention 3's), appends and rotary") {
  // cache_batch_idx picks a row of the page table; cache_leftpad places a sequence's keys that
  // many positions into its pages. Pages of 1, 3 and 16 keys.
  for (int variant = 0; variant < 4; ++variant) {
    InferenceCase c{.seqlens_q = {2, 2, 2}, .seqlens_k = {2, 30, 11}};
    c.keys = KeyStorage::paged;
    c.page_size = variant == 0 ? 16 : variant == 1 ? 3 : 1;
    c.leftpad = variant == 3 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{5, 0, 17};
    c.cache_batch_idx = variant != 1;
    c.append = variant >= 1 ? 2 : 0;
    c.rotary = variant >= 2;
    c.causal = variant % 2 == 0;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seed = static_cast<std::uint64_t>(110 + variant);
    check_case(c);
  }
  // Decoding split across CTAs, GQA-packed, over both.
  InferenceCase decode{.seqlens_q = {1, 1, 1, 1}, .seqlens_k = {70, 3, 129, 40}};
  decode.keys = KeyStorage::paged;
  decode.page_size = 16;
  decode.leftpad = {9, 0, 30, 1};
  decode.cache_batch_idx = true;
  decode.heads_q = 8;
  decode.heads_kv = 2;
  decode.splits = 3;
  decode.seed = 115;
  check_case(decode);
}

TEST_CASE("appending into an fp8 cache (FlashAttention 3's): codes copied, or rotated in fp32") {
  // The new rows arrive as e4m3 codes in the cache's scale; rotated keys are rounded back to
  // e4m3 (the case's reference rounds the float64 rotation of the codes the same way).
  struct Row {
    KeyStorage keys;
    bool rotary, causal;
    DType dtype;
    std::int64_t head_dim;
    InferenceCase::Descale descale;
  };
  using Descale = InferenceCase::Descale;
  for (const Row& row : {Row{KeyStorage::dense, false, false, DType::bf16, 64, Descale::per_head},
                         Row{KeyStorage::paged, true, true, DType::f16, 128, Descale::per_sequence},
                         Row{KeyStorage::dense, true, false, DType::bf16, 64, Descale::per_tensor},
                         Row{KeyStorage::paged, false, true, DType::bf16, 64, Descale::per_head}}) {
    InferenceCase c{.seqlens_q = {2, 2, 2}, .seqlens_k = {2, 30, 75}};
    c.keys = row.keys;
    c.page_size = 8;
    c.kv_e4m3 = true;
    c.descale = row.descale;
    c.append = 2;
    c.rotary = row.rotary;
    c.causal = row.causal;
    c.dtype = row.dtype;
    c.head_dim = row.head_dim;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seed = static_cast<std::uint64_t>(120 + row.head_dim + (row.rotary ? 1 : 0));
    check_case(c);
  }
}

TEST_CASE("appending with packed queries (cu_seqlens_q, FlashAttention 3's varlen q)") {
  // Each sequence's own number of queries over a dense or paged cache, rotated at their own
  // positions (causal: the cached count + i, past the new keys for the longer ones).
  for (int variant = 0; variant < 3; ++variant) {
    InferenceCase c{.seqlens_q = {1, 4, 0, 7}, .seqlens_k = {3, 30, 9, 47}};
    c.packed_q = true;
    c.keys = variant == 1 ? KeyStorage::paged : KeyStorage::dense;
    c.page_size = 5;
    c.append = 3;
    c.rotary = variant != 0;
    c.causal = variant != 2;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.splits = variant == 2 ? 2 : 0;
    c.seed = static_cast<std::uint64_t>(130 + variant);
    check_case(c);
  }
}

TEST_CASE("decoding with an append and rotary reads the cache once: batch 8, context 4096") {
  InferenceCase c = paged_decode_case(8, 4096);
  c.append = 1;
  c.rotary = true;
  emulator().reset_emulated_work();
  check_case(c);
  // Every kernel of the call: the append, the split forward and the merge.
  const double bytes = global_bytes(emulator().emulated_work());
  const double row = 4 * 128 * 2;  // one position's keys (or values) over the kv heads
  const double q_and_o = 2.0 * 8 * 32 * 128 * 2, lse = 8 * 32 * 4;
  const double appended = 2.0 * 8 * row;   // the new keys and values written into the cache
  const double tables = 2.0 * 8 * 64 * 4;  // cos and sin of each new position
  const double minimum = 2.0 * 8 * 4096 * row + q_and_o + lse + appended + tables;
  INFO("global bytes " << bytes << ", minimum " << minimum);
  CHECK(bytes / minimum <= 1.1);
  CHECK(bytes / minimum >= 1.0);
}

}  // namespace flashjit::testing
