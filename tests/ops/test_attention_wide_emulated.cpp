// The wide forward (head dims past 256: DeepSeek's MLA in absorbed decoding, Q and K 576 wide,
// V and O 512) on the CPU emulator against the float64 reference: decoding on paged caches
// (pages of one token and of 64), V in the keys (v a view of k's first 512 columns) or loaded
// on its own, speculative decoding with a causal mask, prefill of packed sequences with masks
// and softcap, split-KV, both dtypes; V in the keys reads K's bytes once; the calls it does not
// take are named before anything runs.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/check/inference_case.hpp"
#include "flashjit/error.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

/// Runs `c`, judges it, and returns the forward kernel's readable name (and its work).
KernelWork check_wide(Runtime& runtime, const InferenceCase& c) {
  INFO(c.name());
  runtime.reset_emulated_work();
  const InferenceVerdict verdict = run_inference_case(runtime, c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  KernelWork forward{};
  for (const KernelWork& kernel : runtime.emulated_work()) {
    if (kernel.kernel.starts_with("attention_forward.")) forward = kernel;
  }
  CHECK_MESSAGE(forward.kernel.find(".wide") != std::string::npos, forward.kernel);
  return forward;
}

/// MLA's absorbed decoding: one query a sequence, `heads` query heads over one latent head,
/// Q and K 576 wide, V and O 512, on a paged cache.
InferenceCase mla_decode(std::int64_t heads, std::int64_t page_size, bool values_in_keys) {
  InferenceCase c;
  c.seqlens_q = {1, 1, 1};
  c.seqlens_k = {1, 45, 130};
  c.heads_q = heads;
  c.heads_kv = 1;
  c.head_dim = 576;
  c.head_dim_v = 512;
  c.keys = KeyStorage::paged;
  c.page_size = page_size;
  c.values_in_keys = values_in_keys;
  c.splits = 1;
  return c;
}

}  // namespace

TEST_CASE("wide forward: MLA's absorbed decoding (576/512), paged, V in the keys or loaded") {
  for (const bool in_keys : {true, false}) {
    for (const std::int64_t page_size : {1, 64}) {
      const KernelWork work = check_wide(emulator(), mla_decode(16, page_size, in_keys));
      CHECK((work.kernel.find(".vk") != std::string::npos) == in_keys);
    }
  }
  {
    InferenceCase c = mla_decode(64, 16, true);  // 64 rows a block: two column groups
    c.dtype = DType::f16;
    check_wide(emulator(), c);
  }
}

TEST_CASE("wide forward: cache rows and left pads over pages (FlashAttention 3's kvcache)") {
  // Each row of 576 read through the sequence's own row of the page table, from its pad on.
  for (const std::int64_t page_size : {1, 16}) {
    InferenceCase c = mla_decode(16, page_size, page_size == 16);
    c.leftpad = {0, 7, 33};
    c.cache_batch_idx = true;
    check_wide(emulator(), c);
  }
}

TEST_CASE("wide forward: speculative decoding, causal, split-KV") {
  InferenceCase c = mla_decode(32, 16, true);
  c.seqlens_q = {3, 3};
  c.seqlens_k = {70, 200};
  c.causal = true;
  c.splits = 3;  // fp32 partials of each warp's columns, merged
  check_wide(emulator(), c);
  c.splits = 0;  // the default's count
  check_wide(emulator(), c);
}

TEST_CASE("wide forward on wgmma (sm_90a): MLA decoding at 128 heads, pages of 1 and 64") {
  // Two 64-row tiles a sequence, each reading every key block; block n + 1's copies and block
  // n + 2's page indices in flight while block n is multiplied.
  for (const std::int64_t page_size : {1, 64}) {
    const KernelWork work = check_wide(hopper_emulator(), mla_decode(128, page_size, true));
    CHECK_MESSAGE(work.kernel.find(".wgmma") != std::string::npos, work.kernel);
  }
  // V loaded on its own stays on the mma.sync form; the wgmma form needs the keys' V.
  CHECK(kernels::wide_forward_config(DType::bf16, 576, 512, MaskKind::none, false, true, "sm_90a",
                                     128)
            .warpgroups());
  CHECK_FALSE(kernels::wide_forward_config(DType::bf16, 576, 512, MaskKind::none, false, false,
                                           "sm_90a", 128)
                  .warpgroups());
  CHECK_FALSE(
      kernels::wide_forward_config(DType::bf16, 576, 512, MaskKind::none, false, true, "sm_80", 128)
          .warpgroups());
}

TEST_CASE("wide forward on wgmma (sm_90a): speculative, causal, split, left pads, f16") {
  // A part-filled tile (16 heads x 2 queries), keys past the sequence's end in its last block,
  // rows that see no key of a split, cache rows and left pads over pages of 16.
  InferenceCase c = mla_decode(16, 16, true);
  c.seqlens_q = {2, 2, 2};
  c.seqlens_k = {1, 70, 200};
  c.causal = true;
  c.splits = 3;
  c.leftpad = {0, 7, 33};
  c.cache_batch_idx = true;
  c.dtype = DType::f16;
  const KernelWork work = check_wide(hopper_emulator(), c);
  CHECK_MESSAGE(work.kernel.find(".wgmma") != std::string::npos, work.kernel);
}

TEST_CASE("wide forward on wgmma, memory model: 64 KB in flight per SM, full sectors, K once") {
  // Two sequences of 1024 keys on pages of 64, 128 heads (two 64-row CTAs a sequence, each
  // reading every key block), unsplit, on the modelled H100.
  static Runtime modelled(RuntimeOptions{
      .backend = Backend::emulator, .emulated_arch = "sm_90a", .model_memory = true});
  InferenceCase c = mla_decode(128, 64, true);
  c.seqlens_q = {1, 1};
  c.seqlens_k = {1024, 1024};
  c.splits = 1;
  const KernelWork work = check_wide(modelled, c);
  const MemoryCounters& memory = work.work.memory;
  REQUIRE(memory.modelled);
  MESSAGE(work.kernel << ": " << memory.bytes_in_flight_per_cta << " bytes in flight a CTA, "
                      << memory.ctas_per_sm << " CTAs an SM, sector use "
                      << memory.global_sector_use() << ", " << memory.dram_bytes_read
                      << " DRAM bytes read");
  CHECK(memory.bytes_in_flight_per_sm >= 64 * 1024);  // a 72 KB key block
  CHECK(memory.global_sector_use() >= 0.99);
  for (const MemorySite& site : memory.sites) {  // the swizzle: no bank conflict anywhere
    if (site.kind == "global_load" || site.kind == "global_store") continue;
    CHECK_MESSAGE(site.conflict_degree() <= 1.0,
                  site.site << " " << site.instruction << ": " << site.conflict_degree() << "-way");
  }
  // The second CTA of a sequence reads its keys from L2: DRAM sees each key byte once (plus Q
  // and the page table).
  const double keys = 2.0 * 1024 * 576 * 2, queries = 2.0 * 128 * 576 * 2;
  CHECK(double(memory.dram_bytes_read) <= 1.02 * (keys + queries + 2 * 16 * 4));
  CHECK(double(memory.global_bytes) >= 2 * keys);
}

TEST_CASE("wide forward: packed prefill at head dims past 256, masks and softcap") {
  InferenceCase c;
  c.seqlens_q = {1, 37, 70};
  c.seqlens_k = {1, 37, 90};
  c.packed_q = true;
  c.keys = KeyStorage::packed;
  c.heads_q = 2;
  c.heads_kv = 1;  // GQA, unpacked (more queries than a decoding block)
  c.head_dim = 320;
  c.head_dim_v = 264;  // a padded V: the column groups' share is whole m16n8k16 steps
  c.causal = true;
  check_wide(emulator(), c);
  c.causal = false;
  c.window_left = 20;
  c.softcap = 30;
  c.dtype = DType::f16;
  check_wide(emulator(), c);
}

TEST_CASE("wide forward: V in the keys reads K's bytes once") {
  // 16 heads fill one query block a sequence: each sequence's K rows are read once, and with
  // V in the keys that is all of the cache the kernel reads (and one page-table entry a row).
  double read[2] = {0, 0};
  for (const bool in_keys : {false, true}) {
    read[in_keys] =
        double(check_wide(emulator(), mla_decode(16, 16, in_keys)).work.global_bytes_read);
  }
  const double keys = (1 + 45 + 130) * 576 * 2, values = (1 + 45 + 130) * 512 * 2;
  const double queries = 3 * 16 * 576 * 2;
  const double page_table = (1 + 45 + 130) * 4;  // a key row's page, once
  MESSAGE("global bytes read: V loaded " << read[0] << ", V in the keys " << read[1] << "; minimum "
                                         << queries + keys);
  CHECK(read[1] <= 1.1 * (queries + keys + page_table));
  CHECK(read[0] >= queries + keys + values);
}

TEST_CASE("wide forward: the calls it does not take are named") {
  Attention a;
  a.head_dim = 576;
  a.head_dim_v = 512;
  // The dense forward and the backward stop at 256 and say where wider heads run.
  CHECK_THROWS_WITH_AS(kernels::validate_forward_arguments(a, {}, {}, {}, {}, {}),
                       doctest::Contains("Runtime::forward with Sequences"), InvalidArgument);
  a.head_dim = 584;  // past MLA's 576
  CHECK_THROWS_WITH_AS(kernels::validate_attention(a, /*wide_head_dims=*/true),
                       doctest::Contains("attention.head_dim"), InvalidArgument);
  // A GPU whose shared memory cannot hold the tiles (99 KB) is told so.
  CHECK_THROWS_WITH_AS(
      kernels::wide_forward_config(DType::bf16, 576, 512, MaskKind::none, false, true, "sm_86", 16),
      doctest::Contains("sm_86 grants a block"), InvalidArgument);
  // An append into v that is k's columns would write the same rows twice.
  {
    InferenceCase c = mla_decode(16, 16, true);
    c.values_in_keys = false;  // (the case refuses the pair; the call is made by hand below)
    const Attention attention = c.attention();
    std::vector<std::uint16_t> q(16 * 576), kv(9 * 16 * 576), o(16 * 512), fresh(576);
    std::int32_t table[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, lengths[1] = {100};
    Sequences s;
    s.page_table = TensorView::contiguous(table, DType::i32, {1, 9});
    s.seqlens_k = TensorView::contiguous(lengths, DType::i32, {1});
    s.k_new = TensorView::contiguous(fresh.data(), DType::bf16, {1, 1, 1, 576});
    s.v_new = TensorView::strided(fresh.data(), DType::bf16, {1, 1, 1, 512}, {576, 576, 576, 1});
    Attention one = attention;
    one.batch = 1;
    one.seqlen_k = 100;
    const TensorView k = TensorView::contiguous(kv.data(), DType::bf16, {9, 16, 1, 576});
    TensorView v = k;
    v.shape[3] = 512;
    CHECK_THROWS_WITH_AS(
        emulator().forward(one, s, TensorView::contiguous(q.data(), DType::bf16, {1, 1, 16, 576}),
                           k, v, TensorView::contiguous(o.data(), DType::bf16, {1, 1, 16, 512}),
                           {}),
        doctest::Contains("sequences.v_new"), InvalidArgument);
  }
  const kernels::ForwardConfig sm80 =
      kernels::wide_forward_config(DType::bf16, 576, 512, MaskKind::none, false, true, "sm_80", 16);
  CHECK(sm80.valid());
  CHECK(sm80.values_in_keys());
  CHECK(sm80.shared_bytes() <= 163 * 1024);
}

}  // namespace flashjit::testing
