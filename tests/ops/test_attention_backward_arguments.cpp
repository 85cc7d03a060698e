// The host side of the attention backward op: every bad argument is a named InvalidArgument,
// good ones pass; the two kernels' config spaces, the heuristic default of each mode, spec
// names, the kernels' arguments, launch shapes and the op's compile matrix.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/attention_backward.hpp"
#include "common/op_registry.hpp"
#include "flashjit/runtime.hpp"
#include "support/argument_cases.hpp"
#include "support/attention_argument_cases.hpp"

using namespace flashjit;
using namespace flashjit::kernels;
using namespace flashjit::testing;
namespace space = flashjit::attention_backward_space;

namespace {

// The forward's buffers and those of dO and the gradients, in one allocation.
struct BackwardBuffers : ForwardBuffers {
  alignas(64) std::uint16_t dout[kQElements];
  alignas(64) std::uint16_t dq[kQElements];
  alignas(64) std::uint16_t dk[kKvElements];
  alignas(64) std::uint16_t dv[kKvElements];
};

// The shared valid call (support/attention_argument_cases.hpp) with dO and the gradients,
// validated by the backward.
struct BackwardCall : AttentionCall<BackwardCall, BackwardBuffers> {
  TensorView dout = tensor(storage->dout, kSeqQ, kHeadsQ);
  TensorView dq = tensor(storage->dq, kSeqQ, kHeadsQ);
  TensorView dk = tensor(storage->dk, kSeqK, kHeadsKv);
  TensorView dv = tensor(storage->dv, kSeqK, kHeadsKv);

  std::vector<TensorView*> all_16_bit() { return {&q, &k, &v, &o, &dout, &dq, &dk, &dv}; }
  void validate() const {
    validate_backward_arguments(attention, q, k, v, o, lse, dout, dq, dk, dv);
  }
};

}  // namespace

TEST_CASE("backward accepts valid calls") {
  BackwardCall call;
  CHECK_NOTHROW(call.validate());
  SUBCASE("fp16") {
    for (TensorView* view : call.all_16_bit()) view->dtype = DType::f16;
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("[B, H, L, D] gradients of [B, L, H, D] inputs") {
    using C = BackwardCall;
    call.dq = C::tensor(call.storage->dq, C::kSeqQ, C::kHeadsQ, Layout::bhsd);
    call.dk = C::tensor(call.storage->dk, C::kSeqK, C::kHeadsKv, Layout::bhsd);
    call.dout = C::tensor(call.storage->dout, C::kSeqQ, C::kHeadsQ, Layout::bhsd);
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("masks and scales") {
    turn_on_options(call.attention);
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("multi-query attention") {
    call.attention.heads_kv = 1;
    for (TensorView* view : {&call.k, &call.v, &call.dk, &call.dv}) view->shape[2] = 1;
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("inputs may share memory: k and v one tensor, dout broadcast over the batch") {
    call.v = call.k;
    call.dout.strides[0] = 0;
    CHECK_NOTHROW(call.validate());
  }
}

TEST_CASE("backward rejects what the forward rejects, by the same name") {
  BackwardCall call;
  SUBCASE("attention fields") {
    call.attention.batch = -1;
    call.rejects("attention.batch");
    call.attention.batch = BackwardCall::kBatch;
    call.attention.head_dim = 100;
    call.rejects("attention.head_dim");
    call.attention.head_dim = BackwardCall::kDim;
    call.attention.heads_kv = 3;
    call.rejects("attention.heads_kv");
    call.attention.heads_kv = BackwardCall::kHeadsKv;
    call.attention.causal = true;
    call.attention.window_right = 2;
    call.rejects("attention.window_right");
  }
  SUBCASE("scales") {
    call.attention.softcap = -1.0f;
    call.rejects("attention.softcap");
    call.attention.softcap = 0.0f;
    call.attention.scale = 0.0f;
    call.rejects("attention.scale");
  }
  call.rejects_each({
      {"null inputs", [](auto& c) { c.k.data = nullptr; }, "k"},
      {"input dtypes",
       [](auto& c) {
         for (TensorView* view : c.all_16_bit()) view->dtype = DType::f32;
       },
       "q.dtype"},
      {"input shapes", [](auto& c) { c.v.shape[1] = 16; }, "v.shape"},
      {"input strides", [](auto& c) { c.q.strides[1] = 132; }, "q.strides"},
      {"misaligned input", [](auto& c) { c.o.data = reinterpret_cast<char*>(c.storage->o) + 2; },
       "o"},
  });
  SUBCASE("lse") {
    call.rejects_each({
        {"dtype", [](auto& c) { c.lse.dtype = DType::bf16; }, "lse.dtype"},
        {"shape", [](auto& c) { c.lse.shape[2] = 15; }, "lse.shape"},
        {"rank", [](auto& c) { c.lse.rank = 2; }, "lse.rank"},
        {"row stride not 1",
         [](auto& c) {
           c.lse.strides = {128, 16, 2, 0};
           c.attention.seqlen_q = 8;
           c.lse.shape = {2, 4, 8, 0};
           for (TensorView* view : {&c.q, &c.o, &c.dout, &c.dq}) view->shape[1] = 8;
         },
         "lse.strides"},
    });
  }
}

TEST_CASE("backward needs the forward pass's lse") {
  BackwardCall call;
  SUBCASE("a null view") { call.lse = TensorView{}; }
  SUBCASE("null data with a valid shape") { call.lse.data = nullptr; }
  call.rejects("lse");
}

TEST_CASE("backward rejects bad gradient tensors by name") {
  BackwardCall call;
  SUBCASE("null pointers") {
    call.rejects_each({
        {"dout", [](auto& c) { c.dout.data = nullptr; }, "dout"},
        {"dq", [](auto& c) { c.dq.data = nullptr; }, "dq"},
        {"dk", [](auto& c) { c.dk.data = nullptr; }, "dk"},
        {"dv", [](auto& c) { c.dv.data = nullptr; }, "dv"},
    });
  }
  SUBCASE("rank") {
    call.dk.rank = 3;
    call.rejects("dk.rank");
  }
  SUBCASE("dtypes differ from q") {
    call.rejects_each({
        {"dout", [](auto& c) { c.dout.dtype = DType::f16; }, "dout.dtype"},
        {"dq", [](auto& c) { c.dq.dtype = DType::f32; }, "dq.dtype"},
        {"dk", [](auto& c) { c.dk.dtype = DType::f16; }, "dk.dtype"},
        {"dv", [](auto& c) { c.dv.dtype = DType::f16; }, "dv.dtype"},
    });
  }
  SUBCASE("shapes") {
    call.rejects_each({
        {"dout like o", [](auto& c) { c.dout.shape[1] = BackwardCall::kSeqK; }, "dout.shape"},
        {"dq like q", [](auto& c) { c.dq.shape[2] = BackwardCall::kHeadsKv; }, "dq.shape"},
        {"dk like k, not like q", [](auto& c) { c.dk.shape = c.q.shape; }, "dk.shape"},
        {"dv head dim", [](auto& c) { c.dv.shape[3] = 32; }, "dv.shape"},
        {"zero size", [](auto& c) { c.dq.shape[0] = 0; }, "dq.shape"},
    });
  }
  SUBCASE("strides") {
    call.rejects_each({
        {"head_dim stride not 1", [](auto& c) { c.dq.strides[3] = 2; }, "dq.strides"},
        {"row stride not a multiple of 8", [](auto& c) { c.dout.strides[1] = 260; },
         "dout.strides"},
        {"head stride not a multiple of 8", [](auto& c) { c.dv.strides[2] = 68; }, "dv.strides"},
        {"negative", [](auto& c) { c.dk.strides[0] = -3072; }, "dk.strides"},
    });
  }
  SUBCASE("not 16-byte aligned") {
    call.dq.data = call.storage->dq + 4;
    for (TensorView* view : call.all_16_bit()) view->shape[0] = 1;  // stay inside the buffers
    call.attention.batch = 1;
    call.lse = lse_tensor(call.storage->lse, call.attention);
    call.rejects("dq");
  }
}

TEST_CASE("backward outputs overlap no input and no other output") {
  BackwardCall call;
  call.rejects_each({
      {"dq is q", [](auto& c) { c.dq = c.q; }, "dq"},
      {"dq overlaps dout (in place)", [](auto& c) { c.dq.data = c.storage->dout; }, "dq"},
      {"dq overlaps o", [](auto& c) { c.dq.data = c.storage->o + 64; }, "dq"},
      {"dk overlaps lse", [](auto& c) { c.dk.data = c.storage->lse; }, "dk"},
      {"dk is k", [](auto& c) { c.dk = c.k; }, "dk"},
      {"dv overlaps v", [](auto& c) { c.dv.data = c.storage->v + 8; }, "dv"},
      {"dk and dv are one tensor", [](auto& c) { c.dv = c.dk; }, "dk"},
      {"dq overlaps dk", [](auto& c) { c.dq.data = c.storage->dk; }, "dq"},
      {"dk rows overlapping each other", [](auto& c) { c.dk.strides[1] = 8; }, "dk.strides"},
      {"dv broadcast over the batch", [](auto& c) { c.dv.strides[0] = 0; }, "dv.strides"},
  });
}

TEST_CASE("backward accepts gradients interleaved in one buffer, and names real aliasing") {
  // FlashAttention's packed layout: Q, K, V in one [B, L, 3, H, D] buffer, dQ, dK, dV in
  // another. The slices share no element, though their address ranges interleave.
  constexpr std::int64_t B = 2, L = 16, H = 2, D = 64, kPacked = B * L * 3 * H * D;
  static std::uint16_t qkv[kPacked], dqkv[kPacked], o[B * L * H * D], dout[B * L * H * D];
  static float lse[B * H * L];
  const Attention attention = make_attention(B, H, H, L, L, D);
  auto slice = [&](std::uint16_t* buffer, int s) {
    return TensorView::strided(buffer + s * H * D, DType::bf16, {B, L, H, D},
                               {L * 3 * H * D, 3 * H * D, D, 1});
  };
  const TensorView q = slice(qkv, 0), k = slice(qkv, 1), v = slice(qkv, 2);
  const TensorView ov = attention_tensor(o, DType::bf16, Layout::bshd, B, L, H, D);
  const TensorView doutv = attention_tensor(dout, DType::bf16, Layout::bshd, B, L, H, D);
  const TensorView lsev = lse_tensor(lse, attention);
  CHECK_NOTHROW(validate_backward_arguments(attention, q, k, v, ov, lsev, doutv, slice(dqkv, 0),
                                            slice(dqkv, 1), slice(dqkv, 2)));
  // dK given dQ's slice: a real alias between two outputs, worded as one.
  check_names(
      [&] {
        validate_backward_arguments(attention, q, k, v, ov, lsev, doutv, slice(dqkv, 0),
                                    slice(dqkv, 0), slice(dqkv, 2));
      },
      "dq", "shares elements with output 'dk'");
  // dV in the Q slice of the packed inputs: an output over an input.
  check_names(
      [&] {
        validate_backward_arguments(attention, q, k, v, ov, lsev, doutv, slice(dqkv, 0),
                                    slice(dqkv, 1), slice(qkv, 0));
      },
      "dv", "shares elements with input 'q'");
}

TEST_CASE("the backward config space lists every valid config once, in a fixed order") {
  for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
    for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
      for (bool softcap : {false, true}) {
        for (bool deterministic : {false, true}) {
          const auto configs =
              backward_configs(DType::bf16, head_dim, mask, softcap, deterministic);
          REQUIRE_MESSAGE(!configs.empty(), "head dim " << head_dim);
          for (const BackwardConfig& config : configs) {
            CHECK(config.valid());
            CHECK(config.head_dim == head_dim);
            CHECK(config.mask == mask);
            CHECK(config.softcap == softcap);
            CHECK(config.deterministic == deterministic);
            CHECK(config.shared_bytes() <= space::kMaxSharedBytes);
            CHECK(config.key.block_m % space::kMmaRows == 0);
            CHECK(config.key.block_n % space::kMmaRows == 0);
            if (!deterministic) CHECK(config.query == QueryBlockTile{});
          }
          std::set<std::string> names;
          for (const BackwardConfig& config : configs) {
            const BackwardSpecs specs = backward_specs(config, "sm_90a");
            names.insert(specs.dkdv.readable_name + " " + specs.dq.readable_name);
          }
          CHECK(names.size() == configs.size());  // each config once
          CHECK(configs == backward_configs(DType::bf16, head_dim, mask, softcap, deterministic));
        }
      }
    }
  }
  // Every dK/dV tile of the candidate lists that the predicate keeps, and nothing else.
  int candidates = 0;
  const auto atomic = backward_configs(DType::f16, 64, MaskKind::none, false, false);
  for (int block_m : space::kKeyBlockM) {
    for (int block_n : space::kKeyBlockN) {
      for (int warps : space::kKeyWarps) {
        for (int stages : space::kKeyStages) {
          ++candidates;
          const KeyBlockTile key{block_m, block_n, warps, stages};
          const BackwardConfig config{DType::f16, 64, MaskKind::none, false, false, key, {}};
          CHECK((std::find(atomic.begin(), atomic.end(), config) != atomic.end()) ==
                space::key_kernel_valid(64, block_m, block_n, warps, stages, false, true));
        }
      }
    }
  }
  CHECK(candidates == 54);
  // The deterministic space is every valid dK/dV tile with every valid dQ tile.
  const auto deterministic = backward_configs(DType::f16, 64, MaskKind::none, false, true);
  // (Then the TMA backward's eight, which have no dQ kernel: Bc 64 and 128, one and two stages,
  // Br 64 and 128.)
  std::set<std::array<int, 4>> keys;
  std::set<std::array<int, 3>> queries;
  std::size_t tma = 0;
  for (const BackwardConfig& c : deterministic) {
    if (c.tma) {
      ++tma;
      CHECK(c.deterministic);
      CHECK(c.query == QueryBlockTile{});
      continue;
    }
    keys.insert({c.key.block_m, c.key.block_n, c.key.warps, c.key.stages});
    queries.insert({c.query.block_m, c.query.block_n, c.query.warps});
  }
  CHECK(tma == 8);
  CHECK(deterministic.size() == keys.size() * queries.size() + tma);
  CHECK(queries.count({64, 64, 4}) == 1);
  CHECK(queries.count({32, 32, 4}) == 0);  // 32 rows over 4 warps
  // FlashAttention-2's 64 x 128 over 8 warps is in the space at head dims 64 and 128.
  auto has_key_tile = [](int head_dim, KeyBlockTile key) {
    const auto configs = backward_configs(DType::bf16, head_dim, MaskKind::none, false, true);
    return std::any_of(configs.begin(), configs.end(),
                       [&](const BackwardConfig& c) { return c.key == key; });
  };
  CHECK(has_key_tile(64, {64, 128, 8, 2}));
  CHECK(has_key_tile(128, {32, 128, 8, 2}));
  CHECK(has_key_tile(256, {32, 64, 8, 2}));
  CHECK(backward_configs(DType::bf16, 100, MaskKind::none, false, false).empty());
  CHECK(backward_configs(DType::f32, 64, MaskKind::none, false, true).empty());
}

TEST_CASE("the default backward config is valid, in the space and fits the arch's shared memory") {
  check_default_configs(
      +[](DType dtype, int head_dim, MaskKind mask, bool softcap, const std::string& arch) {
        return default_backward_config(dtype, head_dim, mask, softcap, false, arch);
      },
      +[](DType dtype, int head_dim, MaskKind mask, bool softcap) {
        return backward_configs(dtype, head_dim, mask, softcap, false);
      });
  check_default_configs(
      +[](DType dtype, int head_dim, MaskKind mask, bool softcap, const std::string& arch) {
        return default_backward_config(dtype, head_dim, mask, softcap, true, arch);
      },
      +[](DType dtype, int head_dim, MaskKind mask, bool softcap) {
        return backward_configs(dtype, head_dim, mask, softcap, true);
      });
}

TEST_CASE(
    "the default backward config: Bc = 128 over 8 warps to head dim 128, then 64, TMA on sm_90a") {
  using Key = std::array<int, 4>;    // Br, Bc, warps, stages
  using Query = std::array<int, 3>;  // Br, Bc, warps
  auto config = [](int head_dim, const char* arch, bool deterministic, bool softcap = false) {
    return default_backward_config(DType::bf16, head_dim, MaskKind::window, softcap, deterministic,
                                   arch);
  };
  auto key = [&](int head_dim, const char* arch, bool deterministic = false) {
    const KeyBlockTile t = config(head_dim, arch, deterministic).key;
    return Key{t.block_m, t.block_n, t.warps, t.stages};
  };
  auto query = [&](int head_dim, const char* arch, bool softcap = false) {
    const QueryBlockTile t = config(head_dim, arch, true, softcap).query;
    return Query{t.block_m, t.block_n, t.warps};
  };
  CHECK(key(64, "sm_80") == Key{64, 128, 8, 2});
  CHECK(key(64, "sm_90a", true) == Key{128, 128, 12, 2});  // the TMA backward, in turns
  CHECK(key(128, "sm_80") == Key{32, 128, 8, 2});
  CHECK(key(128, "sm_90a", true) == Key{64, 128, 12, 2});  // in turns too (two stages, timed)
  CHECK(key(256, "sm_80") == Key{32, 64, 8, 2});
  // sm_90a's both modes from head dim 64: the TMA backward, to a padded head dim of 128 with Bc
  // 128 over two consumer warpgroups and the producer's; above it and at 128 with softcap two
  // warpgroups sharing Bc 64 (12 warps over 64 keys), two stages where they fit; below 64 on
  // sm_90a the mma.sync tiles of sm_80. At a padded head dim of 64, Br 128 (FlashAttention-3's
  // 128 x 128).
  CHECK(config(64, "sm_90a", true).tma);
  CHECK(config(64, "sm_90a", false).tma);
  CHECK(key(64, "sm_90a") == Key{128, 128, 12, 2});
  CHECK(key(72, "sm_90a") == Key{64, 128, 12, 2});
  CHECK(config(128, "sm_90a", false).tma);
  CHECK(key(128, "sm_90a") == Key{64, 128, 12, 2});
  CHECK(key(96, "sm_90a") == Key{64, 128, 12, 2});
  CHECK(!config(96, "sm_90a", false).shared_keys());
  CHECK(config(128, "sm_90a", true).tma);
  CHECK(config(64, "sm_90a", true, /*softcap=*/true).tma);
  CHECK(config(128, "sm_90a", false, /*softcap=*/true).shared_keys());
  CHECK(config(128, "sm_90a", false, /*softcap=*/true).key == KeyBlockTile{64, 64, 12, 2});
  for (const int head_dim : {136, 192, 200, 256}) {
    CAPTURE(head_dim);
    CHECK(config(head_dim, "sm_90a", false).shared_keys());
    CHECK(config(head_dim, "sm_90a", true).shared_keys());
  }
  CHECK(key(192, "sm_90a") == Key{64, 64, 12, 2});
  CHECK(key(256, "sm_90a") == Key{64, 64, 12, 1});  // two stages: 273 KB
  CHECK(!config(56, "sm_90a", false).tma);
  CHECK(!config(128, "sm_80", false).tma);
  const BackwardConfig fallback =
      fallback_backward_config(DType::bf16, 128, MaskKind::window, false, false, "sm_90a");
  CHECK(!fallback.tma);
  CHECK(fallback.key == config(128, "sm_80", false).key);
  // 8 warps cannot split a 64-row atomic dQ block of width 48 in two: the next choice.
  CHECK(key(40, "sm_80") == Key{64, 64, 4, 2});
  CHECK(key(40, "sm_80", true) == Key{64, 128, 8, 2});
  // sm_86's 99 KB takes smaller tiles, and every head dim has one.
  CHECK(config(128, "sm_86", false).shared_bytes() <= 99 * 1024);
  CHECK(config(256, "sm_86", false).shared_bytes() <= 99 * 1024);
  // The dQ kernel's own tile, and its shared memory apart from the dK/dV kernel's.
  CHECK(query(128, "sm_80") == Query{64, 64, 4});
  CHECK(query(152, "sm_80") == Query{32, 32, 2});
  CHECK(query(104, "sm_80", true) == Query{64, 64, 4});
  CHECK(query(112, "sm_80", true) == Query{32, 32, 2});
  const BackwardConfig deterministic = config(128, "sm_80", true);
  CHECK(deterministic.query_shared_bytes() == space::query_kernel_shared_bytes(128, 64, 64));
  CHECK(deterministic.key_shared_bytes() == space::key_kernel_shared_bytes(128, 32, 128, 2));
  CHECK(deterministic.shared_bytes() ==
        std::max(deterministic.key_shared_bytes(), deterministic.query_shared_bytes()));
  CHECK(config(128, "sm_80", false).query_shared_bytes() == 0);
}

TEST_CASE("backward specs name the traits and read like the config") {
  const BackwardConfig config{
      DType::bf16, 128, MaskKind::window, false, false, KeyBlockTile{64, 64, 8, 2}, {}};
  const BackwardSpecs specs = backward_specs(config, "sm_90a");
  CHECK(specs.delta.op == "attention-backward");
  CHECK(specs.delta.header == "attention/fa2/backward_delta_kernel.cuh");
  CHECK(specs.delta.name_expression ==
        "flashjit::attention_backward_delta_kernel<flashjit::bfloat16_t>");
  CHECK(specs.delta.readable_name == "attention_backward.delta.bf16");
  CHECK(specs.delta.arch == "sm_90a");

  CHECK(specs.dkdv.op == "attention-backward");
  CHECK(specs.dkdv.header == "attention/fa2/backward_dkdv_kernel.cuh");
  CHECK(specs.dkdv.name_expression ==
        "flashjit::attention_backward_dkdv_kernel<flashjit::BackwardKeyTraits<"
        "flashjit::bfloat16_t, 128, 64, 64, 8, 2, flashjit::MaskKind::window, false, true>>");
  CHECK(specs.dkdv.readable_name ==
        "attention_backward.dkdv.hdim128.bf16.window.br64.bc64.w8.s2.atomic_dq");
  CHECK(specs.dkdv.display_name() ==
        "attention_backward.dkdv.hdim128.bf16.window.br64.bc64.w8.s2.atomic_dq.sm90a");
  CHECK(specs.dkdv.threads == 256);
  CHECK(specs.dkdv.dynamic_shared_bytes == config.key_shared_bytes());
  // The default mode rounds dQ's sum with a per-row kernel.
  CHECK(specs.dq.header == "attention/fa2/backward_dq_convert_kernel.cuh");
  CHECK(specs.dq.name_expression ==
        "flashjit::attention_backward_dq_convert_kernel<flashjit::bfloat16_t>");
  CHECK(specs.dq.readable_name == "attention_backward.dq_convert.bf16");
  CHECK(specs.in_order().size() == 3);
  CHECK(specs.in_order()[1].readable_name == specs.dkdv.readable_name);

  const BackwardConfig plain{DType::f16,
                             64,
                             MaskKind::none,
                             true,
                             true,
                             KeyBlockTile{32, 32, 2, 1},
                             QueryBlockTile{32, 32, 2}};
  const BackwardSpecs plain_specs = backward_specs(plain, "sm_80");
  CHECK(plain_specs.delta.readable_name == "attention_backward.delta.fp16");
  CHECK(plain_specs.dkdv.readable_name ==
        "attention_backward.dkdv.hdim64.fp16.softcap.br32.bc32.w2.s1");
  CHECK(plain_specs.dkdv.name_expression ==
        "flashjit::attention_backward_dkdv_kernel<flashjit::BackwardKeyTraits<flashjit::half_t, "
        "64, 32, 32, 2, 1, flashjit::MaskKind::none, true, false>>");
  CHECK(plain_specs.dq.header == "attention/fa2/backward_dq_kernel.cuh");
  CHECK(plain_specs.dq.readable_name == "attention_backward.dq.hdim64.fp16.softcap.br32.bc32.w2");
  CHECK(plain_specs.dq.name_expression ==
        "flashjit::attention_backward_dq_kernel<flashjit::BackwardQueryTraits<flashjit::half_t, "
        "64, 32, 32, 2, flashjit::MaskKind::none, true>>");
  CHECK(plain_specs.dq.dynamic_shared_bytes == plain.query_shared_bytes());

  BackwardConfig invalid = plain;
  invalid.query.warps = 4;  // 32 rows over 4 warps
  check_names([&] { backward_specs(invalid, "sm_80"); }, "config");
  invalid = config;
  invalid.query = {32, 32, 2};  // a dQ tile means nothing without the deterministic mode
  check_names([&] { backward_specs(invalid, "sm_80"); }, "config");
}

TEST_CASE("an explicit backward config must match the call") {
  BackwardCall call;
  BackwardConfig config =
      default_backward_config(DType::bf16, 64, MaskKind::none, false, false, "sm_80");
  auto check = [&] { check_backward_config(config, call.attention, call.q); };
  CHECK_NOTHROW(check());
  SUBCASE("head dim") {
    config.head_dim = 128;
    config.key = {32, 32, 2, 1};
    check_names(check, "config");
  }
  SUBCASE("deterministic") {
    config = default_backward_config(DType::bf16, 64, MaskKind::none, false, true, "sm_80");
    check_names(check, "config");
    call.attention.deterministic = true;
    CHECK_NOTHROW(check());
  }
  check_config_mismatches(config, call.attention, check);
  SUBCASE("attention_backward checks arguments and config before it allocates or launches") {
    Runtime runtime({.device = 0, .backend = Backend::emulator});
    config.dtype = DType::f16;
    check_names(
        [&] {
          attention_backward(detail::backend_of(runtime), call.attention, call.q, call.k, call.v,
                             call.o, call.lse, call.dout, call.dq, call.dk, call.dv, config,
                             nullptr);
        },
        "config");
    call.dq = call.dk;
    check_names(
        [&] {
          runtime.backward(call.attention, call.q, call.k, call.v, call.o, call.lse, call.dout,
                           call.dq, call.dk, call.dv);
        },
        "dq.shape");
  }
}

TEST_CASE("backward params fill the forward's fields as the forward does") {
  BackwardCall call;
  Attention& a = call.attention;
  float delta[1];
  auto params = [&] {
    return backward_params(a, call.q, call.k, call.v, call.o, call.lse, call.dout, call.dq, call.dk,
                           call.dv, delta, nullptr);
  };
  auto check_shared_fields = [&] {
    const AttentionBackwardParams p = params();
    const AttentionForwardParams f = forward_params(a, call.q, call.k, call.v, call.o, call.lse);
    const std::pair<HeadTensor, HeadTensor> tensors[] = {
        {p.q, f.q}, {p.k, f.k}, {p.v, f.v}, {p.o, f.o}};
    for (const auto& [backward, forward] : tensors) {
      CHECK(backward.data == forward.data);
      CHECK(backward.batch_stride == forward.batch_stride);
      CHECK(backward.row_stride == forward.row_stride);
      CHECK(backward.head_stride == forward.head_stride);
    }
    CHECK(p.lse == f.lse);
    CHECK(p.lse_batch_stride == f.lse_batch_stride);
    CHECK(p.lse_head_stride == f.lse_head_stride);
    CHECK(p.seqlen_q == f.seqlen_q);
    CHECK(p.seqlen_k == f.seqlen_k);
    CHECK(p.head_dim == f.head_dim);
    CHECK(p.heads_per_kv == f.heads_per_kv);
    CHECK(p.window_left == f.window_left);
    CHECK(p.window_right == f.window_right);
    CHECK(p.score_scale == f.score_scale);
    CHECK(p.softcap_log2 == f.softcap_log2);
  };

  SUBCASE("gradients, workspace and sizes") {
    call.dk = BackwardCall::tensor(call.storage->dk, BackwardCall::kSeqK, BackwardCall::kHeadsKv,
                                   Layout::bhsd);
    const AttentionBackwardParams p = params();
    CHECK(p.dout.data == call.storage->dout);
    CHECK(p.dout.row_stride == 4 * 64);
    CHECK(p.dq.data == call.storage->dq);
    CHECK(p.dq.batch_stride == 16 * 4 * 64);
    CHECK(p.dq.head_stride == 64);
    CHECK(p.dk.data == call.storage->dk);
    CHECK(p.dk.batch_stride == 2 * 24 * 64);
    CHECK(p.dk.row_stride == 64);
    CHECK(p.dk.head_stride == 24 * 64);
    CHECK(p.dv.data == call.storage->dv);
    CHECK(p.dv.row_stride == 2 * 64);
    CHECK(p.delta == delta);
    CHECK(p.batch == 2);
    CHECK(p.heads_q == 4);
    CHECK(p.heads_per_kv == 2);
    CHECK(p.scale == doctest::Approx(0.125f));
    check_shared_fields();
  }
  SUBCASE("the softmax scale, with softcap") {
    a.scale = 0.5f;
    a.softcap = 30.0f;
    CHECK(params().scale == 0.5f);
    check_shared_fields();
  }
  SUBCASE("causal with a left window") {
    a.causal = true;
    a.window_left = 5;
    CHECK(params().window_right == 0);
    CHECK(params().window_left == 5);
    check_shared_fields();
  }
  SUBCASE("windows past every key") {
    a.window_left = 1000;
    a.window_right = 1000;
    CHECK(params().window_left == AttentionBackwardParams::kNoWindow);
    check_shared_fields();
  }
  CHECK(backward_delta_bytes(a) == 2 * 4 * 16 * sizeof(float));
}

TEST_CASE("the backward launches cover every query row and every key block") {
  Attention a = make_attention(3, 8, 2, 301, 65, 128);
  BackwardConfig config{DType::bf16, 128, MaskKind::none, false, false, KeyBlockTile{64, 64, 8, 2},
                        {}};
  BackwardLaunchShapes shapes = backward_launch_shapes(config, a, nullptr);
  CHECK(shapes.delta.grid_x == (301 + kDeltaRowsPerBlock - 1) / kDeltaRowsPerBlock);
  CHECK(shapes.delta.grid_y == 8);
  CHECK(shapes.delta.grid_z == 3);
  CHECK(shapes.delta.block_x == kDeltaRowsPerBlock * 32);
  CHECK(shapes.delta.dynamic_shared_bytes == 0);
  CHECK(shapes.dkdv.grid_x == 2);
  CHECK(shapes.dkdv.grid_y == 2);
  CHECK(shapes.dkdv.grid_z == 3);
  CHECK(shapes.dkdv.block_x == 256);
  CHECK(shapes.dkdv.dynamic_shared_bytes ==
        static_cast<std::size_t>(space::key_kernel_shared_bytes(128, 64, 64, 2)));
  // The convert kernel: one warp per query row, like delta.
  CHECK(shapes.dq.grid_x == shapes.delta.grid_x);
  CHECK(shapes.dq.block_x == shapes.delta.block_x);
  CHECK(shapes.dq.dynamic_shared_bytes == 0);
  CHECK(backward_dq_accum_bytes(a, config) == std::size_t{3} * 8 * 301 * 128 * sizeof(float));
  CHECK(backward_dq_semaphore_bytes(a, config) == 0);

  a.deterministic = true;
  config.deterministic = true;
  config.query = {64, 32, 4};
  shapes = backward_launch_shapes(config, a, nullptr);
  CHECK(shapes.dq.grid_x == 5);
  CHECK(shapes.dq.grid_y == 8);
  CHECK(shapes.dq.grid_z == 3);
  CHECK(shapes.dq.block_x == 128);
  CHECK(shapes.dq.dynamic_shared_bytes ==
        static_cast<std::size_t>(space::query_kernel_shared_bytes(128, 64, 32)));
  CHECK(shapes.dkdv.dynamic_shared_bytes ==
        static_cast<std::size_t>(space::key_kernel_shared_bytes(128, 64, 64, 2)));
  CHECK(backward_dq_accum_bytes(a, config) == 0);
  CHECK(backward_dq_semaphore_bytes(a, config) == 0);

  // The TMA backward sums dQ in both modes; deterministic, it also takes turns per 64-row query
  // block of each batch and head: ceil(301 / 64) = 5 int32 counters each, no dQ kernel.
  config = {DType::bf16, 128, MaskKind::none, false, true, KeyBlockTile{64, 128, 12, 1}, {}};
  config.tma = true;
  REQUIRE(config.valid());
  CHECK_FALSE(config.has_query_kernel());
  CHECK(backward_dq_accum_bytes(a, config) == std::size_t{3} * 8 * 301 * 128 * sizeof(float));
  CHECK(backward_dq_semaphore_bytes(a, config) == std::size_t{3} * 8 * 5 * sizeof(int));
  shapes = backward_launch_shapes(config, a, nullptr);
  CHECK(shapes.dq.grid_x == shapes.delta.grid_x);  // the convert kernel
  CHECK(shapes.dq.dynamic_shared_bytes == 0);
  CHECK(backward_specs(config, "sm_90a").dq.readable_name ==
        "attention_backward.dq_convert.bf16.permuted");
  CHECK(backward_specs(config, "sm_90a").dq.name_expression ==
        "flashjit::attention_backward_dq_convert_kernel<flashjit::bfloat16_t, false, true>");
  CHECK(backward_specs(config, "sm_90a").dkdv.readable_name ==
        "attention_backward.dkdv.hdim128.bf16.br64.bc128.w12.s1.tma.deterministic");
  config.deterministic = false;
  CHECK(backward_dq_semaphore_bytes(a, config) == 0);
}

TEST_CASE("attention-backward lists the compile matrix") {
  const OpInfo& op = find_op("attention-backward");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const auto defaults = op.specs(arch, SpecSet::defaults);
    const auto all = op.specs(arch, SpecSet::all);
    std::set<std::string> all_names;
    for (const auto& spec : all) {
      CHECK(spec.arch == arch);
      CHECK(spec.op == "attention-backward");
      all_names.insert(spec.readable_name);
    }
    CHECK(all_names.size() == all.size());  // each kernel once
    std::set<std::string> default_names;
    for (const auto& spec : defaults) default_names.insert(spec.readable_name);
    CHECK(default_names.size() == defaults.size());
    for (const std::string& name : default_names) CHECK(all_names.count(name) == 1);
    // One delta and one convert kernel per dtype.
    for (const char* dtype : {"bf16", "fp16"}) {
      CHECK(all_names.count(std::string("attention_backward.delta.") + dtype) == 1);
      CHECK(all_names.count(std::string("attention_backward.dq_convert.") + dtype) == 1);
    }
    // Every kernel of every default config (both modes), and of every swept config.
    auto lists = [&](const std::set<std::string>& names, const BackwardConfig& config) {
      for (const auto& spec : backward_specs(config, arch).in_order()) {
        CHECK_MESSAGE(names.count(spec.readable_name) == 1, spec.readable_name);
      }
    };
    for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
      for (DType dtype : {DType::f16, DType::bf16}) {
        for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
          for (bool deterministic : {false, true}) {
            lists(default_names,
                  default_backward_config(dtype, head_dim, mask, false, deterministic, arch));
          }
        }
      }
    }
    // The sweep on sm_80 only (its mma.sync tiles); sm_90a lists its defaults.
    if (std::string(arch) != "sm_80") {
      CHECK(all.size() == defaults.size());
      continue;
    }
    CHECK(all.size() > defaults.size());
    for (int head_dim : {64, 128}) {  // swept with the window mask
      for (const BackwardConfig& config :
           backward_configs(DType::bf16, head_dim, MaskKind::window, false, false)) {
        if (runs_on(config, arch)) lists(all_names, config);
      }
    }
  }
}

TEST_CASE("backward with a value head dim: dout and dv as wide as o and v") {
  BackwardCall call;
  using C = BackwardCall;
  const auto narrow = [](void* data, std::int64_t seqlen, std::int64_t heads) {
    return attention_tensor(data, DType::bf16, Layout::bshd, C::kBatch, seqlen, heads, 32);
  };
  call.attention.head_dim_v = 32;
  call.v = narrow(call.storage->v, C::kSeqK, C::kHeadsKv);
  call.o = narrow(call.storage->o, C::kSeqQ, C::kHeadsQ);
  call.rejects("dout.shape");
  call.dout = narrow(call.storage->dout, C::kSeqQ, C::kHeadsQ);
  call.rejects("dv.shape");
  call.dv = narrow(call.storage->dv, C::kSeqK, C::kHeadsKv);
  CHECK_NOTHROW(call.validate());
  call.dq = narrow(call.storage->dq, C::kSeqQ, C::kHeadsQ);  // dQ stays head_dim wide
  call.rejects("dq.shape");
}
