// The host side of the attention backward op: every bad argument is a named InvalidArgument,
// good ones pass; the config space, the heuristic default, spec names (and the dK/dV split
// above head dim 64), the kernels' arguments, launch shapes and the op's compile matrix.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/runtime_parts.hpp"
#include "flashjit/runtime.hpp"
#include "kernels/attention_backward.hpp"
#include "kernels/op_registry.hpp"
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
        const auto configs = backward_configs(DType::bf16, head_dim, mask, softcap);
        REQUIRE_MESSAGE(!configs.empty(), "head dim " << head_dim);
        for (const BackwardConfig& config : configs) {
          CHECK(config.valid());
          CHECK(config.head_dim == head_dim);
          CHECK(config.mask == mask);
          CHECK(config.softcap == softcap);
          CHECK(config.shared_bytes() <= space::kMaxSharedBytes);
          CHECK(config.block_m % (config.warps * space::kMmaRows) == 0);
          CHECK(config.block_n % (config.warps * space::kMmaRows) == 0);
          CHECK(std::count(configs.begin(), configs.end(), config) == 1);
        }
        CHECK(configs == backward_configs(DType::bf16, head_dim, mask, softcap));
      }
    }
  }
  // Every (Br, Bc, warps) of the candidate lists that the predicate keeps, and nothing else.
  int candidates = 0;
  for (int block_m : space::kBlockM) {
    for (int block_n : space::kBlockN) {
      for (int warps : space::kWarps) {
        ++candidates;
        const BackwardConfig config{DType::f16, 64, block_m, block_n, warps};
        const auto configs = backward_configs(DType::f16, 64, MaskKind::none, false);
        CHECK((std::find(configs.begin(), configs.end(), config) != configs.end()) ==
              space::config_valid(64, block_m, block_n, warps));
      }
    }
  }
  CHECK(candidates == 27);
  using Tile = std::array<int, 3>;  // Br, Bc, warps
  auto tiles = [](int head_dim) {
    std::vector<Tile> result;
    for (const BackwardConfig& c : backward_configs(DType::bf16, head_dim, MaskKind::none, false)) {
      result.push_back({c.block_m, c.block_n, c.warps});
    }
    return result;
  };
  // dK and dV both in registers at 64 leave room for Bc 64 over 4 warps and Bc 32 over 2 only.
  CHECK(tiles(64) == std::vector<Tile>{{32, 32, 2}, {64, 32, 2}, {64, 64, 4}});
  CHECK(tiles(128) == std::vector<Tile>{{32, 32, 2}, {64, 64, 4}});
  CHECK(tiles(256) == std::vector<Tile>{{32, 32, 2}});
  CHECK(tiles(8).size() == 9);
  CHECK(backward_configs(DType::bf16, 100, MaskKind::none, false).empty());
  CHECK(backward_configs(DType::f32, 64, MaskKind::none, false).empty());
}

TEST_CASE("the default backward config is valid, in the space and fits the arch's shared memory") {
  check_default_configs(default_backward_config, backward_configs);
}

TEST_CASE(
    "the default backward config: 64 x 64 tiles, 32 x 32 past 144 or where those do not fit") {
  using Tile = std::array<int, 3>;  // Br, Bc, warps
  auto tile = [](int head_dim, const char* arch, bool softcap = false,
                 MaskKind mask = MaskKind::window) {
    const BackwardConfig c = default_backward_config(DType::bf16, head_dim, mask, softcap, arch);
    return Tile{c.block_m, c.block_n, c.warps};
  };
  CHECK(tile(8, "sm_80") == Tile{64, 64, 4});
  CHECK(tile(64, "sm_90a") == Tile{64, 64, 4});
  CHECK(tile(128, "sm_80") == Tile{64, 64, 4});
  CHECK(tile(128, "sm_90a", false, MaskKind::none) == Tile{64, 64, 4});
  CHECK(tile(128, "sm_86") == Tile{32, 32, 2});  // 64 x 64 needs 102 KB of 99
  CHECK(tile(144, "sm_90a") == Tile{64, 64, 4});
  CHECK(tile(152, "sm_80") == Tile{32, 32, 2});
  CHECK(tile(256, "sm_90a") == Tile{32, 32, 2});
  CHECK(tile(256, "sm_86") == Tile{32, 32, 2});  // exactly 99 KB
  // Softcap shrinks the tiles sooner.
  CHECK(tile(104, "sm_90a", true) == Tile{64, 64, 4});
  CHECK(tile(112, "sm_80", true) == Tile{32, 32, 2});
  CHECK(tile(128, "sm_90a", true) == Tile{32, 32, 2});
  // The same rule on every arch: no per-arch exceptions (none of the defaults spills).
  CHECK(tile(16, "sm_80") == Tile{64, 64, 4});
  CHECK(tile(16, "sm_90a") == Tile{64, 64, 4});
  CHECK(tile(136, "sm_90a") == Tile{64, 64, 4});
  CHECK(tile(136, "sm_80") == Tile{64, 64, 4});
  CHECK(tile(168, "sm_80") == Tile{32, 32, 2});
  CHECK(tile(184, "sm_80") == Tile{32, 32, 2});
  CHECK(BackwardConfig{DType::bf16, 256, 32, 32, 2}.shared_bytes() == 99 * 1024);
}

TEST_CASE("backward specs name the traits and read like the config") {
  const BackwardConfig config{DType::bf16, 128, 64, 64, 4, MaskKind::window, false};
  const BackwardSpecs specs = backward_specs(config, "sm_90a");
  CHECK(specs.delta.op == "attention-backward");
  CHECK(specs.delta.header == "attention/backward_delta_kernel.cuh");
  CHECK(specs.delta.name_expression ==
        "flashjit::attention_backward_delta_kernel<flashjit::bfloat16_t>");
  CHECK(specs.delta.readable_name == "attention_backward.delta.bf16");
  CHECK(specs.delta.arch == "sm_90a");

  const std::string traits =
      "flashjit::BackwardTraits<flashjit::bfloat16_t, 128, 64, 64, 4, "
      "flashjit::MaskKind::window, false, "
      "flashjit::attention_backward_space::KeyGradients::";
  CHECK(specs.dq.op == "attention-backward");
  CHECK(specs.dq.header == "attention/backward_dq_kernel.cuh");
  CHECK(specs.dq.name_expression == "flashjit::attention_backward_dq_kernel<" + traits + "both>>");
  CHECK(specs.dq.readable_name == "attention_backward.dq.hdim128.bf16.window.br64.bc64.w4");
  CHECK(specs.dq.display_name() == "attention_backward.dq.hdim128.bf16.window.br64.bc64.w4.sm90a");

  // Above head dim 64 the dK/dV kernel runs twice, dK then dV.
  REQUIRE(specs.key_gradients.size() == 2);
  const detail::KernelSpec& dk = specs.key_gradients[0];
  const detail::KernelSpec& dv = specs.key_gradients[1];
  CHECK(dk.header == "attention/backward_dkdv_kernel.cuh");
  CHECK(dk.name_expression == "flashjit::attention_backward_dkdv_kernel<" + traits + "dk>>");
  CHECK(dk.readable_name == "attention_backward.dk.hdim128.bf16.window.br64.bc64.w4");
  CHECK(dv.name_expression == "flashjit::attention_backward_dkdv_kernel<" + traits + "dv>>");
  CHECK(dv.readable_name == "attention_backward.dv.hdim128.bf16.window.br64.bc64.w4");
  CHECK(dv.op == "attention-backward");
  CHECK(dv.arch == "sm_90a");

  const BackwardConfig plain{DType::f16, 64, 32, 32, 2, MaskKind::none, true};
  const BackwardSpecs plain_specs = backward_specs(plain, "sm_80");
  CHECK(plain_specs.delta.readable_name == "attention_backward.delta.fp16");
  CHECK(plain_specs.delta.name_expression ==
        "flashjit::attention_backward_delta_kernel<flashjit::half_t>");
  CHECK(plain_specs.dq.readable_name == "attention_backward.dq.hdim64.fp16.softcap.br32.bc32.w2");
  REQUIRE(plain_specs.key_gradients.size() == 1);
  CHECK(plain_specs.key_gradients[0].readable_name ==
        "attention_backward.dkdv.hdim64.fp16.softcap.br32.bc32.w2");
  CHECK(plain_specs.key_gradients[0].name_expression ==
        "flashjit::attention_backward_dkdv_kernel<flashjit::BackwardTraits<flashjit::half_t, 64, "
        "32, 32, 2, flashjit::MaskKind::none, true, "
        "flashjit::attention_backward_space::KeyGradients::both>>");

  BackwardConfig invalid = plain;
  invalid.warps = 4;  // 32 rows over 4 warps
  check_names([&] { backward_specs(invalid, "sm_80"); }, "config");
}

TEST_CASE("dK and dV split into two launches exactly above head dim 64") {
  for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
    const BackwardConfig config =
        default_backward_config(DType::bf16, head_dim, MaskKind::none, false, "sm_90a");
    const BackwardSpecs specs = backward_specs(config, "sm_90a");
    const std::string suffix = ".hdim" + std::to_string(head_dim) + ".bf16";
    if (head_dim <= 64) {
      CHECK(!space::split_key_gradients(head_dim));
      REQUIRE(specs.key_gradients.size() == 1);
      CHECK(specs.key_gradients[0].readable_name.starts_with("attention_backward.dkdv" + suffix));
      CHECK(specs.key_gradients[0].name_expression.ends_with("KeyGradients::both>>"));
    } else {
      CHECK(space::split_key_gradients(head_dim));
      REQUIRE(specs.key_gradients.size() == 2);
      CHECK(specs.key_gradients[0].readable_name.starts_with("attention_backward.dk" + suffix));
      CHECK(specs.key_gradients[0].name_expression.ends_with("KeyGradients::dk>>"));
      CHECK(specs.key_gradients[1].readable_name.starts_with("attention_backward.dv" + suffix));
      CHECK(specs.key_gradients[1].name_expression.ends_with("KeyGradients::dv>>"));
    }
    // The dQ kernel always takes both gradients' traits.
    CHECK(specs.dq.name_expression.ends_with("KeyGradients::both>>"));
  }
}

TEST_CASE("an explicit backward config must match the call") {
  BackwardCall call;
  BackwardConfig config = default_backward_config(DType::bf16, 64, MaskKind::none, false, "sm_80");
  auto check = [&] { check_backward_config(config, call.attention, call.q); };
  CHECK_NOTHROW(check());
  SUBCASE("head dim") {
    config.head_dim = 128;
    config.block_m = config.block_n = 32;
    config.warps = 2;
    check_names(check, "config");
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
                           call.dv, delta);
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
  const Attention a = make_attention(3, 8, 2, 301, 65, 128);
  const BackwardConfig config{DType::bf16, 128, 64, 64, 4, MaskKind::none, false};
  const BackwardLaunchShapes shapes = backward_launch_shapes(config, a, nullptr);
  CHECK(shapes.delta.grid_x == (301 + kDeltaRowsPerBlock - 1) / kDeltaRowsPerBlock);
  CHECK(shapes.delta.grid_y == 8);
  CHECK(shapes.delta.grid_z == 3);
  CHECK(shapes.delta.block_x == kDeltaRowsPerBlock * 32);
  CHECK(shapes.delta.dynamic_shared_bytes == 0);
  CHECK(shapes.dq.grid_x == 5);
  CHECK(shapes.dq.grid_y == 8);
  CHECK(shapes.dq.grid_z == 3);
  CHECK(shapes.dq.block_x == 128);
  CHECK(shapes.dq.dynamic_shared_bytes == static_cast<std::size_t>(config.shared_bytes()));
  CHECK(shapes.key_gradients.grid_x == 2);
  CHECK(shapes.key_gradients.grid_y == 2);
  CHECK(shapes.key_gradients.grid_z == 3);
  CHECK(shapes.key_gradients.block_x == 128);
  CHECK(shapes.key_gradients.dynamic_shared_bytes ==
        static_cast<std::size_t>(config.shared_bytes()));
  CHECK(config.shared_bytes() == space::shared_bytes(128, 64, 64));
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
    // One delta kernel per dtype.
    CHECK(all_names.count("attention_backward.delta.bf16") == 1);
    CHECK(all_names.count("attention_backward.delta.fp16") == 1);
    // Every kernel of every default config, and of every swept config.
    auto lists = [&](const std::set<std::string>& names, const BackwardConfig& config) {
      const BackwardSpecs specs = backward_specs(config, arch);
      CHECK(names.count(specs.delta.readable_name) == 1);
      CHECK(names.count(specs.dq.readable_name) == 1);
      for (const auto& spec : specs.key_gradients) CHECK(names.count(spec.readable_name) == 1);
    };
    for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
      for (DType dtype : {DType::f16, DType::bf16}) {
        for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
          lists(default_names, default_backward_config(dtype, head_dim, mask, false, arch));
        }
      }
    }
    for (int head_dim : {64, 128}) {
      for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
        for (const BackwardConfig& config : backward_configs(DType::bf16, head_dim, mask, false)) {
          lists(all_names, config);
        }
      }
    }
  }
}
