// Score and mask modifiers (Attention::score_mod, mask_mod) compiled into the forward kernel and
// run on the CPU emulator, against the float64 reference evaluating the same expressions (each
// test writes an expression once: MODIFIER gives its text for the kernel and a host lambda of
// the same text for the reference). Also: a causal mask written as a mask modifier gives the
// built-in causal's bits; bad modifiers are named errors that launch nothing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/check/attention_case.hpp"
#include "attention/check/inference_case.hpp"
#include "flashjit/error.hpp"
#include "support/emulator_runtime.hpp"
#include "support/forward_case_builders.hpp"
#include "support/modifier_expressions.hpp"

// The expressions are written as users write them, ints mixed into float arithmetic.
#pragma GCC diagnostic ignored "-Wconversion"

namespace flashjit::testing {
namespace {

ForwardCase with_score_mod(
    ForwardCase c, std::string text,
    std::function<double(double, std::int64_t, std::int64_t, std::int64_t, std::int64_t)> f) {
  c.problem.score_mod_text = std::move(text);
  c.problem.score_mod = std::move(f);
  return c;
}

ForwardCase with_mask_mod(
    ForwardCase c, std::string text,
    std::function<bool(std::int64_t, std::int64_t, std::int64_t, std::int64_t)> f) {
  c.problem.mask_mod_text = std::move(text);
  c.problem.mask_mod = std::move(f);
  return c;
}

void check_cases(Runtime& runtime, const std::vector<ForwardCase>& cases) {
  for (const ForwardCase& c : cases) {
    INFO(c.name());
    const ForwardVerdict verdict = run_forward_case(runtime, c);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
  }
}

}  // namespace

TEST_CASE("modifiers on the emulator: a score modifier of the head and both indices") {
  // ALiBi: a slope per head, the distance to the key; causal, GQA, ragged tiles.
  ForwardCase alibi = with_score_mod(make_case(4, 2, 129, 150, 64, true),
                                     SCORE_MOD(score - 0.125f * (h + 1) * (q_idx + 21 - kv_idx)));
  // Every score halved after a softcap of 30 (the modifier sees the capped score), fp16, bhsd.
  ForwardCase capped = with_score_mod(make_case(2, 2, 70, 70, 128), SCORE_MOD(score * 0.5f));
  capped.problem.softcap = 30.0;
  capped.dtype = DType::f16;
  capped.layout = reference::Layout::bhsd;
  check_cases(emulator(), {alibi, capped});
}

TEST_CASE("modifiers on the emulator: a mask modifier, alone and with a score modifier") {
  // Documents of 40 tokens (two batch entries), and rows that see no key at all.
  ForwardCase documents =
      with_mask_mod(make_case(2, 1, 130, 130, 64), MASK_MOD(q_idx / 40 == kv_idx / 40));
  documents.problem.batch = 2;
  // Rows from 12 on see no key (O = 0, LSE = -inf); the first ones see the last keys only.
  ForwardCase blind = with_mask_mod(make_case(1, 1, 33, 33, 64), MASK_MOD(kv_idx > q_idx + 20));
  ForwardCase both =
      with_score_mod(with_mask_mod(make_case(4, 1, 65, 97, 64), MASK_MOD((kv_idx + h) % 3 != 0)),
                     SCORE_MOD(score + 0.5f * b - 0.01f * kv_idx));
  both.problem.batch = 2;
  check_cases(emulator(), {documents, blind, both});
}

TEST_CASE("modifiers on an emulated sm_90a: the TMA kernels run them, GQA and causal") {
  Runtime& runtime = hopper_emulator();
  const auto modified = [](ForwardCase c) {
    return with_mask_mod(
        with_score_mod(std::move(c), SCORE_MOD(score - 0.05f * h - 0.01f * (q_idx - kv_idx))),
        MASK_MOD(kv_idx % 7 != 3 || q_idx < 9));
  };
  ForwardCase batched = modified(make_case(4, 2, 200, 230, 128));  // clusters of two CTAs
  batched.problem.batch = 2;
  const std::vector<ForwardCase> cases = {
      modified(make_case(4, 1, 100, 130, 64, true)),  // persistent
      modified(make_case(2, 1, 100, 100, 128, true)), batched,
      with_score_mod(make_case(2, 2, 70, 90, 256), SCORE_MOD(score * (1 + h) + 0.5f * b))};
  for (const ForwardCase& c : cases) {
    INFO(c.name());
    runtime.reset_emulated_work();
    const ForwardVerdict verdict = run_forward_case(runtime, c);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
    const std::vector<KernelWork> work = runtime.emulated_work();
    // The forward, after the automatic block mask's builder on a mask's first call (this mask
    // hides no whole block, so the forward runs without it).
    REQUIRE((work.size() == 1 || (work.size() == 2 && c.problem.mask_mod &&
                                  work.front().kernel.find("block_mask") != std::string::npos)));
    CHECK(work.back().kernel.find(".tma") != std::string::npos);
    CHECK(work.back().kernel.find(".mod") != std::string::npos);
  }
  // A wrong modifier in the reference fails: the kernel really applies them.
  ForwardCase wrong = cases[1];
  wrong.problem.score_mod = [](double s, std::int64_t, std::int64_t h, std::int64_t, std::int64_t) {
    return s - 0.05 * double(h);
  };
  CHECK_FALSE(run_forward_case(runtime, wrong).ok);
}

TEST_CASE("modifiers: causal as a mask modifier gives the built-in causal's bits") {
  const Attention builtin{.batch = 2,
                          .heads_q = 4,
                          .heads_kv = 2,
                          .seqlen_q = 100,
                          .seqlen_k = 130,
                          .head_dim = 64,
                          .causal = true};
  Attention written = builtin;
  written.causal = false;
  written.mask_mod = "kv_idx <= q_idx + 30";  // the bottom-right diagonal: seqlen_k - seqlen_q
  CHECK(forward_bits(written) == forward_bits(builtin));
  written.mask_mod = "kv_idx <= q_idx + 29";  // one key fewer per row: different bits
  CHECK(forward_bits(written) != forward_bits(builtin));
  // The same on sm_90a's TMA kernels (persistent at head dim 64, the built-in's and the
  // modifier's alike).
  written.mask_mod = "kv_idx <= q_idx + 30";
  CHECK(forward_bits(written, false, hopper_emulator()) ==
        forward_bits(builtin, false, hopper_emulator()));
}

/// The tensor-core FLOPs of the last forward_bits() call on `runtime`.
double last_tensor_flops(Runtime& runtime = emulator()) {
  double flops = 0;
  for (const KernelWork& kernel : runtime.emulated_work()) {
    flops += double(kernel.work.tensor_flops);
  }
  return flops;
}

TEST_CASE("block mask: 256-token documents over 1024 tokens skip the other documents' blocks") {
  Attention a{
      .batch = 1, .heads_q = 2, .heads_kv = 1, .seqlen_q = 1024, .seqlen_k = 1024, .head_dim = 64};
  a.mask_mod = "q_idx / 256 == kv_idx / 256";
  const std::vector<std::uint32_t> plain = forward_bits(a);
  const double plain_flops = last_tensor_flops();
  const std::vector<std::uint32_t> skipping = forward_bits(a, /*block_mask=*/true);
  const double skipping_flops = last_tensor_flops();
  CHECK(skipping == plain);  // a skipped block adds exactly nothing
  INFO("tensor FLOPs " << skipping_flops << " with the block mask, " << plain_flops << " without");
  CHECK(skipping_flops <= 0.5 * plain_flops);
  CHECK(skipping_flops >= 0.25 * plain_flops);  // each document's own blocks remain

  // sm_90a's TMA kernel cuts each tile's key range the same way.
  Runtime& hopper = hopper_emulator();
  const std::vector<std::uint32_t> hopper_plain = forward_bits(a, false, hopper);
  const double hopper_plain_flops = last_tensor_flops(hopper);
  CHECK(forward_bits(a, true, hopper) == hopper_plain);
  REQUIRE(hopper.emulated_work().size() == 1);
  CHECK(hopper.emulated_work().front().kernel.find(".tma") != std::string::npos);
  INFO("TMA: " << last_tensor_flops(hopper) << " with the block mask, " << hopper_plain_flops
               << " without");
  CHECK(last_tensor_flops(hopper) <= 0.5 * hopper_plain_flops);

  // The entries: slab 20 (rows 320-335) sees keys 256-511, all of them.
  const std::int64_t slabs = 64;
  DeviceBuffer mask = emulator().allocate(2 * slabs * 16);
  emulator().build_block_mask(a, TensorView::contiguous(mask.data(), DType::i32, {1, 2, slabs, 4}));
  std::vector<std::int32_t> entries(2 * slabs * 4);
  emulator().copy_to_host(entries.data(), mask.data(), entries.size() * 4);
  CHECK(std::vector<std::int32_t>(entries.begin() + 20 * 4, entries.begin() + 21 * 4) ==
        std::vector<std::int32_t>{256, 512, 256, 512});
}

TEST_CASE("block mask: built without asking, once, where it skips blocks") {
  Attention a{
      .batch = 1, .heads_q = 2, .heads_kv = 1, .seqlen_q = 1024, .seqlen_k = 1024, .head_dim = 64};
  a.mask_mod = "(q_idx / 256) == (kv_idx / 256)";
  Runtime runtime(RuntimeOptions{.backend = Backend::emulator});  // its own: nothing built yet
  const std::vector<std::uint32_t> plain = forward_bits(a, false, runtime);
  const double plain_flops = last_tensor_flops(runtime);
  CHECK(forward_bits(a, false, runtime, /*automatic=*/true) == plain);
  REQUIRE(runtime.emulated_work().size() == 2);  // the first call builds the mask, then runs
  CHECK(runtime.emulated_work().front().kernel.find("block_mask") != std::string::npos);
  const double automatic_flops = last_tensor_flops(runtime);
  INFO("tensor FLOPs " << automatic_flops << " automatically, " << plain_flops << " without");
  CHECK(automatic_flops <= 0.5 * plain_flops);
  CHECK(forward_bits(a, false, runtime, true) == plain);
  CHECK(runtime.emulated_work().size() == 1);  // kept: the second call only runs
  CHECK(last_tensor_flops(runtime) == automatic_flops);

  // A mask that hides no whole block is not worth a block mask: every block runs, as without.
  Attention sparse = a;
  sparse.mask_mod = "(q_idx + kv_idx) % 7 != 3";
  forward_bits(sparse, false, runtime);
  const double sparse_flops = last_tensor_flops(runtime);
  forward_bits(sparse, false, runtime, true);
  CHECK(last_tensor_flops(runtime) == sparse_flops);
  // Nor is a mask that reads a capture (its values are the caller's): build_block_mask is.
  std::vector<std::int32_t> documents(1024);
  for (std::size_t i = 0; i < documents.size(); ++i) documents[i] = static_cast<int>(i / 256);
  DeviceBuffer doc = runtime.allocate(documents.size() * 4);
  runtime.copy_to_device(doc.data(), documents.data(), documents.size() * 4);
  Attention captured = a;
  captured.mask_mod = "doc[q_idx] == doc[kv_idx]";
  captured.captures = {
      {.name = "doc", .tensor = TensorView::contiguous(doc.data(), DType::i32, {1024})}};
  CHECK(forward_bits(captured, false, runtime, true) == plain);
  CHECK(last_tensor_flops(runtime) == plain_flops);
}

TEST_CASE("block mask: causal written as a mask_mod matches the built-in's bits and counters") {
  const Attention builtin{.batch = 1,
                          .heads_q = 2,
                          .heads_kv = 2,
                          .seqlen_q = 300,
                          .seqlen_k = 300,
                          .head_dim = 64,
                          .causal = true};
  const std::vector<std::uint32_t> expected = forward_bits(builtin);
  Attention written = builtin;
  written.causal = false;
  written.mask_mod = "kv_idx <= q_idx";
  CHECK(forward_bits(written, /*block_mask=*/true) == expected);
  // The counters on the same tiles: a modifier's calls run the 16-rows-a-warp config, so the
  // built-in causal is counted there too (an identity score modifier puts it on that config).
  Attention builtin_on_modifier_tiles = builtin;
  builtin_on_modifier_tiles.score_mod = written.score_mod = "score";
  forward_bits(builtin_on_modifier_tiles);
  const double builtin_flops = last_tensor_flops();
  forward_bits(written, /*block_mask=*/true);
  const double written_flops = last_tensor_flops();
  INFO("tensor FLOPs " << written_flops << " as a mask_mod, " << builtin_flops << " built in");
  CHECK(written_flops <= 1.05 * builtin_flops);
  CHECK(written_flops >= 0.95 * builtin_flops);
}

TEST_CASE("block mask: bad ones are named, and the calls that do not take one say so") {
  Attention a{.seqlen_q = 40, .seqlen_k = 40};
  DeviceBuffer mask = emulator().allocate(3 * 16);
  const TensorView good = TensorView::contiguous(mask.data(), DType::i32, {1, 1, 3, 4});
  CHECK_THROWS_WITH_AS(emulator().build_block_mask(a, good), doctest::Contains("'block_mask'"),
                       InvalidArgument);  // no mask_mod
  a.mask_mod = "kv_idx != 3";
  CHECK_THROWS_WITH_AS(
      emulator().build_block_mask(a, TensorView::contiguous(mask.data(), DType::i32, {1, 1, 2, 4})),
      doctest::Contains("'block_mask.shape'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(
      emulator().build_block_mask(a, TensorView::contiguous(mask.data(), DType::f32, {1, 1, 3, 4})),
      doctest::Contains("'block_mask.dtype'"), InvalidArgument);
  emulator().build_block_mask(a, good);
  a.block_mask = good;
  std::vector<std::uint16_t> zeros(40 * 64, 0);
  DeviceBuffer x = emulator().allocate(zeros.size() * 2);
  emulator().copy_to_device(x.data(), zeros.data(), zeros.size() * 2);
  const TensorView t = TensorView::contiguous(x.data(), DType::bf16, {1, 40, 1, 64});
  DeviceBuffer o = emulator().allocate(zeros.size() * 2);
  const TensorView out = TensorView::contiguous(o.data(), DType::bf16, {1, 40, 1, 64});
  Attention without_mod = a;
  without_mod.mask_mod.clear();
  CHECK_THROWS_WITH_AS(emulator().forward(without_mod, t, t, t, out, TensorView{}),
                       doctest::Contains("'attention.block_mask'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(emulator().forward(a, Sequences{}, t, t, t, out, TensorView{}),
                       doctest::Contains("'attention.block_mask'"), InvalidArgument);
  emulator().forward(a, t, t, t, out, TensorView{});  // the good one runs
}

TEST_CASE("modifiers: kernel names, keys and the struct the kernel takes") {
  const kernels::ForwardConfig config =
      kernels::modifiers_forward_config(DType::bf16, 64, MaskKind::none, false, "sm_80");
  const kernels::ScoreModifiers alibi{"score - 0.5f * (q_idx - kv_idx)", ""};
  const kernels::ScoreModifiers other{"score - 0.25f * (q_idx - kv_idx)", ""};
  const detail::KernelSpec plain = kernels::forward_spec(config, "sm_80");
  const detail::KernelSpec a = kernels::forward_spec(config, "sm_80", alibi);
  const detail::KernelSpec b = kernels::forward_spec(config, "sm_80", other);
  CHECK(plain.prelude.empty());
  CHECK(a.readable_name != plain.readable_name);
  CHECK(a.readable_name != b.readable_name);
  CHECK(a.name_expression.find(alibi.type_name()) != std::string::npos);
  CHECK(a.main_source().find("score - 0.5f * (q_idx - kv_idx)") != std::string::npos);
  CHECK(a.main_source().find("#line 1 \"attention.score_mod\"") != std::string::npos);
  // The TMA kernel's: the modifiers' struct its traits' last argument.
  const kernels::ForwardConfig tma =
      kernels::default_forward_config(DType::bf16, 64, MaskKind::none, false, "sm_90a");
  REQUIRE(tma.path() == kernels::ForwardPath::tma);
  const detail::KernelSpec hopper = kernels::forward_spec(tma, "sm_90a", alibi);
  CHECK(hopper.name_expression.find(", " + alibi.type_name() + ">>") != std::string::npos);
  CHECK(hopper.readable_name.find(".mod") != std::string::npos);
  CHECK(hopper.main_source().find("score - 0.5f * (q_idx - kv_idx)") != std::string::npos);
  CHECK(kernels::forward_spec(tma, "sm_90a").prelude.empty());
  // The dense forward's choice: TMA on sm_90a (one CTA a tile with a block mask, the form that
  // reads it), mma.sync off Hopper.
  Attention call{.head_dim = 64, .score_mod = alibi.score};
  CHECK(kernels::dense_modifiers_forward_config(DType::bf16, call, "sm_90a").path() ==
        kernels::ForwardPath::tma);
  CHECK(kernels::dense_modifiers_forward_config(DType::bf16, call, "sm_80").path() ==
        kernels::ForwardPath::mma_sync);
  std::int32_t entries[4] = {};
  call.block_mask = TensorView::contiguous(entries, DType::i32, {1, 1, 1, 4});
  const kernels::ForwardConfig masked =
      kernels::dense_modifiers_forward_config(DType::bf16, call, "sm_90a");
  CHECK(masked.path() == kernels::ForwardPath::tma);
  CHECK_FALSE(masked.persistent());
  CHECK_FALSE(masked.cluster());
  kernels::ForwardConfig wgmma{DType::bf16, 64, 128, 128, 8, 1, MaskKind::none, false};
  wgmma.options = kernels::WgmmaOptions{};
  CHECK_THROWS_WITH_AS(kernels::forward_spec(wgmma, "sm_90a", alibi),
                       doctest::Contains("the wgmma path"), InvalidArgument);
}

TEST_CASE("modifiers: bad text is a named error before anything runs") {
  Attention a;
  a.seqlen_q = a.seqlen_k = 16;
  const auto rejects = [&](const char* field, const std::string& text, const char* why) {
    Attention bad = a;
    (std::string(field) == "attention.score_mod" ? bad.score_mod : bad.mask_mod) = text;
    INFO(text);
    const std::string quoted = std::string("'") + field + "'";
    CHECK_THROWS_WITH_AS(kernels::validate_attention(bad), doctest::Contains(quoted.c_str()),
                         InvalidArgument);
    CHECK_THROWS_WITH_AS(kernels::validate_attention(bad), doctest::Contains(why), InvalidArgument);
  };
  rejects("attention.score_mod", "score; return 0", "';'");
  rejects("attention.score_mod", "score #define x", "'#'");
  rejects("attention.score_mod", "score) + (score", "')' where the expression should end");
  rejects("attention.score_mod", "(score", "ends where a ')' closing the '(' should be");
  rejects("attention.score_mod", "score // comment", "'/' where a number");
  rejects("attention.score_mod", "score + asm(0)", "'asm'");
  rejects("attention.score_mod", "score } struct X {", "'}'");
  rejects("attention.mask_mod", "   ", "blank");
  rejects("attention.mask_mod", "q_idx == \"x\"[0]", "'\"'");
  rejects("attention.mask_mod", std::string(5000, 'q'), "over 4096");
  // A lambda is a program, not an expression of the grammar (tests/ops/test_modifier_grammar.cpp
  // has the whole table).
  rejects("attention.score_mod", "([&] { float s = score; return s * 2; }())", "'{'");
}

TEST_CASE(
    "modifiers in the inference forward: paged decoding on the decode kernel (sm_80 and sm_90a), "
    "speculative tokens, packed prefill, an append") {
  // ALiBi-like with the head and both indices, and a mask of the sequence's index: each
  // sequence sees its own b, and its own positions.
  const auto with_modifiers = [](InferenceCase c) {
    std::tie(c.score_mod_text, c.score_mod) =
        std::pair{SCORE_MOD(score - 0.0625f * (h + 1) * (q_idx - kv_idx))};
    std::tie(c.mask_mod_text, c.mask_mod) = std::pair{MASK_MOD((kv_idx + b) % 5 != 0)};
    return c;
  };
  InferenceCase decode{.seqlens_q = {1, 1, 1}, .seqlens_k = {40, 9, 70}};
  decode.heads_q = 8;
  decode.heads_kv = 2;
  decode.keys = KeyStorage::paged;
  decode.page_size = 3;
  decode.causal = true;
  decode.splits = 2;
  InferenceCase prefill = random_lengths_case(3, 40, 60, 90);
  prefill.keys = KeyStorage::packed;
  prefill.causal = true;
  InferenceCase append{.seqlens_q = {2, 2}, .seqlens_k = {5, 33}};
  append.append = 2;
  append.rotary = true;
  append.heads_q = 4;
  append.heads_kv = 2;
  // Two speculative tokens of a GQA group of 4, causal, on pages of 1: the decode kernel's
  // packed rows (query, head) each see their own q_idx and h.
  InferenceCase speculative{.seqlens_q = {2, 2}, .seqlens_k = {37, 80}};
  speculative.heads_q = 8;
  speculative.heads_kv = 2;
  speculative.keys = KeyStorage::paged;
  speculative.page_size = 1;
  speculative.causal = true;
  const auto ran_decode_kernel = [](const std::vector<KernelWork>& work) {
    return std::any_of(work.begin(), work.end(), [](const KernelWork& k) {
      return k.kernel.find(".decode") != std::string::npos &&
             k.kernel.find(".mod") != std::string::npos;
    });
  };
  for (const InferenceCase& c : {decode, speculative, prefill, append}) {
    const InferenceCase m = with_modifiers(c);
    INFO(m.name());
    emulator().reset_emulated_work();
    const InferenceVerdict verdict = run_inference_case(emulator(), m);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
    // Decoding calls (a few queries a sequence) run the decode kernel with the modifiers in it.
    const bool decoding = *std::max_element(c.seqlens_q.begin(), c.seqlens_q.end()) <= 2;
    if (decoding) CHECK(ran_decode_kernel(emulator().emulated_work()));
  }
  for (const InferenceCase& c : {decode, speculative}) {  // and on sm_90a
    const InferenceCase m = with_modifiers(c);
    INFO(m.name());
    hopper_emulator().reset_emulated_work();
    const InferenceVerdict verdict = run_inference_case(hopper_emulator(), m);
    CHECK_MESSAGE(verdict.ok, verdict.describe());
    CHECK(ran_decode_kernel(hopper_emulator().emulated_work()));
  }
  // Packed prefill on sm_90a: the TMA kernel, each tile finding its sequence (one split, as a
  // prefill large enough to fill the SMs runs; 64 queries or more, as GQA packing of shorter
  // ones is mma.sync's).
  InferenceCase hopper_prefill{.seqlens_q = {1, 0, 90, 70}, .seqlens_k = {1, 17, 120, 70}};
  hopper_prefill.packed_q = true;
  hopper_prefill.keys = KeyStorage::packed;
  hopper_prefill.causal = true;
  hopper_prefill.heads_kv = 2;
  hopper_prefill.splits = 1;
  const InferenceCase m = with_modifiers(hopper_prefill);
  hopper_emulator().reset_emulated_work();
  const InferenceVerdict verdict = run_inference_case(hopper_emulator(), m);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  const std::vector<KernelWork> work = hopper_emulator().emulated_work();
  CHECK(std::any_of(work.begin(), work.end(), [](const KernelWork& k) {
    return k.kernel.find(".tma") != std::string::npos &&
           k.kernel.find(".varlen") != std::string::npos &&
           k.kernel.find(".mod") != std::string::npos;
  }));
}

TEST_CASE("modifiers: an expression that does not compile is reported with the caller's text") {
  Attention a;
  a.seqlen_q = a.seqlen_k = 16;
  // In the grammar, but '%' takes ints and the score is a float: the host compiler refuses it.
  a.score_mod = "score % 2";
  std::vector<std::uint32_t> bits;
  try {
    bits = forward_bits(a);
    FAIL("a float remainder compiled");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(e.kind() == ErrorKind::compile);
    CHECK(message.find("attention.score_mod") != std::string::npos);
    CHECK(message.find("%") != std::string::npos);
  }
}

}  // namespace flashjit::testing
