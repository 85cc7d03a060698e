// The forward's inference layouts on the CPU emulator through Runtime::forward(attention,
// sequences, ...), each sequence against its own float64 reference (attention/inference_case):
// variable lengths (0 and 1 included), paged caches with shuffled pages, decoding with GQA
// packing and split-KV, and the split result equal to the unsplit one within rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention/check/inference_case.hpp"
#include "support/emulator_runtime.hpp"

namespace flashjit::testing {
namespace {

InferenceVerdict check_case(const InferenceCase& c) {
  INFO(c.name());
  InferenceVerdict verdict = run_inference_case(emulator(), c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  return verdict;
}

/// The largest |a - b| relative to the largest |b|: two runs' outputs, which differ by the
/// rounding of their fp32 partials to the output dtype at most.
double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace

TEST_CASE("variable lengths: 1 to 8 sequences of random lengths, 0 and 1 included") {
  for (int sequences : {1, 3, 8}) {
    for (bool causal : {false, true}) {
      InferenceCase c = random_lengths_case(sequences, 70, 90, 10 + sequences);
      c.causal = causal;
      c.keys = KeyStorage::packed;
      check_case(c);
    }
  }
}

TEST_CASE(
    "packed prefill on sm_90a runs the TMA forward: lengths 0 to 300, masks, GQA, hd 64-256") {
  static Runtime hopper(RuntimeOptions{.backend = Backend::emulator, .emulated_arch = "sm_90a"});
  // Splits 1: with so few query blocks the library would split the keys (mma.sync's split-KV,
  // which fills the SMs); a prefill large enough to fill them takes the TMA kernel unsplit.
  auto check_tma_case = [](InferenceCase c) {
    c.splits = 1;
    INFO(c.name());
    hopper.reset_emulated_work();
    const InferenceVerdict verdict = run_inference_case(hopper, c);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
    // Prefill of packed sequences takes the TMA kernel's varlen specialization, and only it.
    const std::vector<KernelWork> work = hopper.emulated_work();
    REQUIRE(work.size() == 1);
    INFO(work[0].kernel);
    CHECK(work[0].kernel.find(".tma.") != std::string::npos);
    CHECK(work[0].kernel.find(".varlen") != std::string::npos);
  };
  for (bool causal : {false, true}) {
    // Longer than a query block (128 rows) and shorter, 0 and 1 among them.
    InferenceCase c{.seqlens_q = {1, 0, 300, 129, 64}, .seqlens_k = {1, 17, 300, 200, 64}};
    c.packed_q = true;
    c.keys = KeyStorage::packed;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.causal = causal;
    c.seed = causal ? 7 : 8;
    c.spare_rows = 50;  // NaN past the last sequence's keys, where its last box reads
    check_tma_case(c);
  }
  InferenceCase window{.seqlens_q = {190, 3, 77}, .seqlens_k = {260, 40, 0}};
  window.packed_q = true;
  window.keys = KeyStorage::packed;
  window.window_left = 50;
  window.head_dim = 128;
  window.dtype = DType::f16;
  check_tma_case(window);
  InferenceCase wide{.seqlens_q = {150, 70}, .seqlens_k = {90, 200}};
  wide.packed_q = true;
  wide.keys = KeyStorage::packed;
  wide.head_dim = 256;
  wide.heads_q = 2;
  wide.spare_rows = 30;
  check_tma_case(wide);
}

TEST_CASE("paged caches: shuffled pages of 16, 32, 64 and 256 keys, lengths ending mid-page") {
  for (std::int64_t page_size : {16, 32, 64, 256}) {
    InferenceCase c{.seqlens_q = {3, 3, 3}, .seqlens_k = {1, page_size + 5, 2 * page_size - 3}};
    c.keys = KeyStorage::paged;
    c.page_size = page_size;
    c.causal = page_size == 32;
    c.seed = static_cast<std::uint64_t>(page_size);
    check_case(c);
  }
}

TEST_CASE("decoding: 1 and 4 queries, GQA 8:1 and MQA, splits 1 to 16 equal to unsplit") {
  for (std::int64_t queries : {1, 4}) {
    for (std::int64_t heads_kv : {2, 1}) {  // 16 query heads on 2 (8:1), 8 on 1 (MQA)
      InferenceCase c{.seqlens_q = {queries, queries}, .seqlens_k = {300, 177}};
      c.heads_q = 8 * heads_kv;
      c.heads_kv = heads_kv;
      c.keys = KeyStorage::paged;
      c.page_size = 32;
      c.causal = true;
      c.splits = 1;
      const InferenceVerdict unsplit = check_case(c);
      // Every count for one shape; a spread for the others.
      const bool every = queries == 1 && heads_kv == 2;
      for (int splits = 2; splits <= 16; splits += every ? 1 : 7) {
        c.splits = splits;
        INFO("splits " << splits);
        const InferenceVerdict split = check_case(c);
        // The fp32 partials merge to within the output dtype's rounding of the unsplit result.
        CHECK(relative_difference(split.out, unsplit.out) < 1.0 / 64);
      }
    }
  }
}

TEST_CASE("a paged cache with packed queries of several lengths against their pages") {
  for (bool causal : {true, false}) {
    InferenceCase c{.seqlens_q = {5, 1, 0, 17}, .seqlens_k = {40, 1, 9, 100}};
    c.packed_q = true;
    c.keys = KeyStorage::paged;
    c.page_size = 16;
    c.heads_q = 8;
    c.heads_kv = 2;
    c.causal = causal;
    c.splits = causal ? 3 : 0;
    check_case(c);
  }
}

TEST_CASE("dense keys with per-sequence counts, fp16, head dims 8 to 256") {
  for (std::int64_t head_dim : {8, 80, 128, 256}) {
    InferenceCase c{.seqlens_q = {7, 7}, .seqlens_k = {0, 45}};
    c.head_dim = head_dim;
    c.dtype = DType::f16;
    c.heads_q = 2;
    c.heads_kv = 2;
    c.seed = static_cast<std::uint64_t>(head_dim);
    check_case(c);
  }
}

}  // namespace flashjit::testing

namespace flashjit::testing {

TEST_CASE("decoding reads the KV cache once: batch 8, context 4096, head dim 128, GQA 8:1") {
  InferenceCase c = paged_decode_case(8, 4096);
  emulator().reset_emulated_work();
  check_case(c);
  const double bytes = global_bytes(emulator().emulated_work());  // split forward and merge
  const double q_and_o = 2.0 * 8 * 32 * 128 * 2, lse = 8 * 32 * 4;
  const double minimum = 2.0 * 8 * 4096 * 4 * 128 * 2 + q_and_o + lse;  // K, V once; Q, O, LSE
  INFO("global bytes " << bytes << ", minimum " << minimum);
  CHECK(bytes / minimum <= 1.1);
  CHECK(bytes / minimum >= 1.0);
}

}  // namespace flashjit::testing

namespace flashjit::testing {

TEST_CASE("backward of variable lengths: 1 to 8 sequences, 0 and 1 included, both dQ modes") {
  for (int sequences : {1, 3, 8}) {
    for (bool causal : {false, true}) {
      InferenceCase c = random_lengths_case(sequences, 40, 70, 20 + sequences);
      c.causal = causal;
      c.keys = KeyStorage::packed;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.deterministic = sequences == 3;
      INFO(c.name());
      const InferenceVerdict verdict = run_inference_backward_case(emulator(), c);
      CHECK_MESSAGE(verdict.ok, verdict.describe());
    }
  }
}

TEST_CASE("backward with packed keys and dense queries of one length, head dims 8 and 128") {
  for (std::int64_t head_dim : {8, 128}) {
    InferenceCase c{.seqlens_q = {9, 9, 9}, .seqlens_k = {0, 30, 75}};
    c.keys = KeyStorage::packed;
    c.head_dim = head_dim;
    c.dtype = DType::f16;
    INFO(c.name());
    const InferenceVerdict verdict = run_inference_backward_case(emulator(), c);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
  }
}

}  // namespace flashjit::testing

namespace flashjit::testing {

TEST_CASE(
    "sliding windows and softcap, per sequence: packed prefill, paged split decode, backward") {
  InferenceCase prefill = random_lengths_case(4, 60, 80, 33);
  prefill.keys = KeyStorage::packed;
  prefill.causal = true;
  prefill.window_left = 17;
  check_case(prefill);
  prefill.window_left = -1;
  prefill.softcap = 2.0;
  check_case(prefill);

  InferenceCase decode{.seqlens_q = {1, 1, 1}, .seqlens_k = {250, 97, 16}};
  decode.keys = KeyStorage::paged;
  decode.page_size = 32;
  decode.heads_q = 8;
  decode.heads_kv = 2;
  decode.causal = true;
  decode.window_left = 40;
  decode.softcap = 5.0;
  decode.splits = 4;
  check_case(decode);

  InferenceCase backward = random_lengths_case(3, 40, 60, 7);
  backward.keys = KeyStorage::packed;
  backward.causal = true;
  backward.window_left = 9;
  backward.softcap = 3.0;
  INFO(backward.name());
  const InferenceVerdict verdict = run_inference_backward_case(emulator(), backward);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

}  // namespace flashjit::testing

namespace flashjit::testing {

TEST_CASE("a dense batch with no index array: GQA packing and splits on plain tensors") {
  for (int splits : {1, 0, 3}) {
    InferenceCase c{.seqlens_q = {2, 2}, .seqlens_k = {200, 200}};
    c.heads_q = 16;
    c.heads_kv = 2;
    c.causal = true;
    c.splits = splits;
    check_case(c);
  }
}

}  // namespace flashjit::testing
