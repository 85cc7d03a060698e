// The host side of the attention forward op: every bad argument is a named InvalidArgument, good
// ones pass; the config space, the heuristic default, spec names, the kernel's arguments and
// the tensor helpers.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <numbers>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/inference/attention_inference.hpp"
#include "common/op_registry.hpp"
#include "support/argument_cases.hpp"
#include "support/attention_argument_cases.hpp"

using namespace flashjit;
using namespace flashjit::kernels;
using namespace flashjit::testing;
namespace space = flashjit::attention_forward_space;

namespace {

constexpr std::int64_t kNoWindow = AttentionForwardParams::kNoWindow;

// The shared valid call (support/attention_argument_cases.hpp), validated by the forward.
struct ForwardCall : AttentionCall<ForwardCall> {
  void validate() const { validate_forward_arguments(attention, q, k, v, o, lse); }
};

}  // namespace

TEST_CASE("forward accepts valid calls") {
  ForwardCall call;
  CHECK_NOTHROW(call.validate());
  SUBCASE("without lse") {
    call.lse = TensorView{};
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("a null lse view skips every lse check") {
    call.lse.data = nullptr;
    call.lse.dtype = DType::f16;
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("fp16") {
    for (TensorView* view : {&call.q, &call.k, &call.v, &call.o}) view->dtype = DType::f16;
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("[B, H, L, D] layout") {
    using C = ForwardCall;
    call.q = C::tensor(call.storage->q, C::kSeqQ, C::kHeadsQ, Layout::bhsd);
    call.k = C::tensor(call.storage->k, C::kSeqK, C::kHeadsKv, Layout::bhsd);
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("padded rows and a key/value tensor shared by the batch (stride 0)") {
    call.k.strides = {0, 8 * 24, 96, 1};  // rows of 2 heads of 96 (64 used)
    call.k.shape = {2, 12, 2, 64};
    call.v.shape = call.k.shape;
    call.v.strides = call.k.strides;
    call.attention.seqlen_k = 12;
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("odd strides along dimensions of size 1") {
    call.attention.batch = 1;
    call.attention.heads_q = call.attention.heads_kv = 1;
    call.attention.seqlen_q = 1;
    call.q = TensorView::strided(call.storage->q, DType::bf16, {1, 1, 1, 64}, {3, 5, 7, 1});
    call.o = TensorView::strided(call.storage->o, DType::bf16, {1, 1, 1, 64}, {3, 5, 7, 1});
    call.k = TensorView::strided(call.storage->k, DType::bf16, {1, 24, 1, 64}, {1, 128, 9, 1});
    call.v = call.k;
    call.v.data = call.storage->v;
    call.lse = lse_tensor(call.storage->lse, call.attention);
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("masks and scales") {
    turn_on_options(call.attention);
    call.attention.window_right = 0;  // what causal implies, said again
    CHECK_NOTHROW(call.validate());
  }
  SUBCASE("multi-query attention") {
    call.attention.heads_kv = 1;
    call.k.shape[2] = call.v.shape[2] = 1;
    CHECK_NOTHROW(call.validate());
  }
}

TEST_CASE("forward accepts O interleaved with Q in one buffer") {
  // [B, L, 2, H, D]: Q in slice 0, O in slice 1; their address ranges interleave, their
  // elements do not meet. O over Q's own slice is refused, naming both.
  constexpr std::int64_t B = 2, L = 16, H = 2, D = 64;
  static std::uint16_t qo[B * L * 2 * H * D], k[B * L * H * D], v[B * L * H * D];
  const Attention attention = make_attention(B, H, H, L, L, D);
  auto slice = [&](int s) {
    return TensorView::strided(qo + s * H * D, DType::bf16, {B, L, H, D},
                               {L * 2 * H * D, 2 * H * D, D, 1});
  };
  const TensorView kv = attention_tensor(k, DType::bf16, Layout::bshd, B, L, H, D);
  const TensorView vv = attention_tensor(v, DType::bf16, Layout::bshd, B, L, H, D);
  CHECK_NOTHROW(validate_forward_arguments(attention, slice(0), kv, vv, slice(1), TensorView{}));
  check_names([&] { validate_forward_arguments(attention, slice(0), kv, vv, slice(0), {}); }, "o",
              "shares elements with input 'q'");
}

TEST_CASE("forward rejects bad attention fields by name") {
  ForwardCall call;
  Attention& a = call.attention;
  SUBCASE(
      "negative sizes, and no heads (a batch or sequence of 0 is an empty call: see "
      "test_attention_empty)") {
    call.rejects_each({
        {"batch", [](auto& c) { c.attention.batch = -1; }, "attention.batch"},
        {"heads_q", [](auto& c) { c.attention.heads_q = -4; }, "attention.heads_q"},
        {"heads_kv", [](auto& c) { c.attention.heads_kv = 0; }, "attention.heads_kv"},
        {"seqlen_q", [](auto& c) { c.attention.seqlen_q = -2; }, "attention.seqlen_q"},
        {"seqlen_k", [](auto& c) { c.attention.seqlen_k = -1; }, "attention.seqlen_k"},
        {"head_dim", [](auto& c) { c.attention.head_dim = 0; }, "attention.head_dim"},
    });
  }
  SUBCASE("sizes the grid or the 32-bit mask cannot hold") {
    call.rejects_each({
        {"batch", [](auto& c) { c.attention.batch = kMaxGridYZ + 1; }, "attention.batch"},
        {"heads_q", [](auto& c) { c.attention.heads_q = kMaxGridYZ + 1; }, "attention.heads_q"},
        {"seqlen_q", [](auto& c) { c.attention.seqlen_q = kMaxSeqlen + 1; }, "attention.seqlen_q"},
        {"seqlen_k", [](auto& c) { c.attention.seqlen_k = std::int64_t{1} << 40; },
         "attention.seqlen_k"},
    });
  }
  SUBCASE("unsupported head dims") {
    for (std::int64_t dim : {std::int64_t{4}, std::int64_t{12}, std::int64_t{63}, std::int64_t{264},
                             std::int64_t{1} << 33}) {
      a.head_dim = dim;
      call.rejects("attention.head_dim");
    }
  }
  SUBCASE("heads_q not a multiple of heads_kv") {
    a.heads_kv = 3;
    call.rejects("attention.heads_kv");
    a.heads_kv = 8;  // more key/value heads than query heads
    call.rejects("attention.heads_kv");
  }
  SUBCASE("windows below -1") {
    a.window_left = -2;
    call.rejects("attention.window_left");
    a.window_left = -1;
    a.window_right = -7;
    call.rejects("attention.window_right");
  }
  SUBCASE("causal with keys right of the diagonal") {
    a.causal = true;
    a.window_right = 3;
    call.rejects("attention.window_right");
  }
  SUBCASE("bad softcap") {
    for (float softcap :
         {-1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      a.softcap = softcap;
      call.rejects("attention.softcap");
    }
    a.softcap = 1e-40f;  // scale / softcap overflows fp32
    call.rejects("attention.softcap");
  }
  SUBCASE("bad scale") {
    for (float scale : {0.0f, -0.125f, std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN()}) {
      a.scale = scale;
      call.rejects("attention.scale");
    }
    a.scale = 3e38f;  // scale · log2(e) overflows fp32
    call.rejects("attention.scale");
  }
}

TEST_CASE("forward rejects bad tensors by name") {
  ForwardCall call;
  SUBCASE("null pointers") {
    call.rejects_each({
        {"q", [](auto& c) { c.q.data = nullptr; }, "q"},
        {"k", [](auto& c) { c.k.data = nullptr; }, "k"},
        {"v", [](auto& c) { c.v.data = nullptr; }, "v"},
        {"o", [](auto& c) { c.o.data = nullptr; }, "o"},
    });
  }
  SUBCASE("rank") {
    call.q.rank = 3;
    call.rejects("q.rank");
  }
  SUBCASE("dtypes") {
    call.rejects_each({
        {"fp32 inputs",
         [](auto& c) {
           for (TensorView* view : {&c.q, &c.k, &c.v, &c.o}) view->dtype = DType::f32;
         },
         "q.dtype"},
        {"k differs from q", [](auto& c) { c.k.dtype = DType::f16; }, "k.dtype"},
        {"v differs from q", [](auto& c) { c.v.dtype = DType::f16; }, "v.dtype"},
        {"o differs from q", [](auto& c) { c.o.dtype = DType::f16; }, "o.dtype"},
        {"lse not fp32", [](auto& c) { c.lse.dtype = DType::bf16; }, "lse.dtype"},
    });
  }
  SUBCASE("shapes that disagree with the attention") {
    call.rejects_each({
        {"q seqlen", [](auto& c) { c.q.shape[1] = 15; }, "q.shape"},
        {"k heads_q instead of heads_kv", [](auto& c) { c.k.shape[2] = 4; }, "k.shape"},
        {"v seqlen", [](auto& c) { c.v.shape[1] = 16; }, "v.shape"},
        {"o head_dim", [](auto& c) { c.o.shape[3] = 32; }, "o.shape"},
        {"o batch", [](auto& c) { c.o.shape[0] = 1; }, "o.shape"},
        {"lse shape",
         [](auto& c) {
           c.lse.shape = {2, 16, 4, 0};
         },
         "lse.shape"},
        {"lse rank",
         [](auto& c) {
           c.lse.rank = 4;
           c.lse.shape[3] = 1;
         },
         "lse.rank"},
        {"zero size", [](auto& c) { c.q.shape[1] = 0; }, "q.shape"},
    });
  }
  SUBCASE("strides") {
    call.rejects_each({
        {"head_dim stride not 1", [](auto& c) { c.q.strides[3] = 2; }, "q.strides"},
        {"row stride not a multiple of 8", [](auto& c) { c.k.strides[1] = 132; }, "k.strides"},
        {"head stride not a multiple of 8", [](auto& c) { c.v.strides[2] = 68; }, "v.strides"},
        {"negative stride", [](auto& c) { c.q.strides[0] = -8192; }, "q.strides"},
        {"lse row stride not 1",
         [](auto& c) {
           c.lse.strides = {128, 16, 2, 0};
           c.lse.shape = {2, 4, 8, 0};
           c.attention.seqlen_q = 8;
           c.q.shape[1] = c.o.shape[1] = 8;
         },
         "lse.strides"},
        {"extent overflowing 64-bit offsets",
         [](auto& c) { c.q.strides[0] = std::int64_t{1} << 62; }, "q.shape"},
    });
  }
  SUBCASE("misaligned pointers") {
    call.rejects_each({
        {"not aligned to the element",
         [](auto& c) { c.q.data = reinterpret_cast<char*>(c.storage->q) + 1; }, "q"},
        {"aligned to the element but not to 16 bytes",
         [](auto& c) {
           c.k.data = c.storage->k + 4;
           c.k.shape[0] = 1;  // stay inside the buffer
           c.v.shape[0] = 1;
           c.q.shape[0] = c.o.shape[0] = 1;
           c.attention.batch = 1;
           c.lse = lse_tensor(c.storage->lse, c.attention);
         },
         "k"},
    });
  }
  SUBCASE("outputs sharing memory") {
    call.rejects_each({
        {"o is q", [](auto& c) { c.o = c.q; }, "o"},
        {"o overlaps v", [](auto& c) { c.o.data = c.storage->v; }, "o"},
        {"o overlaps lse", [](auto& c) { c.lse.data = c.storage->o + 64; }, "o"},
        {"lse overlaps k", [](auto& c) { c.lse.data = c.storage->k; }, "lse"},
        {"o rows overlapping each other",
         [](auto& c) { c.o.strides[1] = 8; },  // 64-element rows 8 apart
         "o.strides"},
        {"o broadcast over the batch", [](auto& c) { c.o.strides[0] = 0; }, "o.strides"},
        {"lse heads overlapping", [](auto& c) { c.lse.strides[1] = 1; }, "lse.strides"},
    });
  }
}

TEST_CASE("the config space lists every valid config once, in a fixed order") {
  for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
    for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
      const auto configs = forward_configs(DType::f16, head_dim, mask, false);
      REQUIRE_MESSAGE(!configs.empty(), "head dim " << head_dim);
      for (const ForwardConfig& config : configs) {
        CHECK(config.valid());
        CHECK(config.head_dim == head_dim);
        CHECK(config.mask == mask);
        CHECK(config.shared_bytes() <= space::kMaxSharedBytes);
        CHECK(std::count(configs.begin(), configs.end(), config) == 1);
      }
      CHECK(configs == forward_configs(DType::f16, head_dim, mask, false));
    }
  }
  // Br 64 with 8 warps is never valid (16 rows per warp); at 128, S and O of Br 128 x Bc 128
  // over 4 warps exceed the accumulator budget.
  // 18 tiles at 64, 16 at 128, each also with Q in registers where the registers allow (16 at
  // 64; 12 at 128, where 4 warps of 32 rows would need 224 or more), the wgmma path's 4 (Br
  // and Bc 64 or 128) and the TMA path's 56 with two stages (Br 64, 128 or 192 by Bc 64, 80,
  // 96, 112, 128 or 176, each with and without overlap, and with pingpong too at Br 128: 42;
  // and again with P in shared memory where Bc is 64 or 128: 14), plus the overlapped
  // schedules' three-stage configs that fit in shared memory (32 at head dim 64, 24 at 128),
  // and every overlapped config with P in registers again persistent (48 at 64, 43 at 128),
  // and from head dim 128 (padded), unmasked, those 43 again in 2-CTA clusters.
  CHECK(forward_configs(DType::bf16, 64, MaskKind::none, false).size() == 94 + 32 + 48);
  CHECK(forward_configs(DType::bf16, 128, MaskKind::none, false).size() == 88 + 24 + 43 + 43);
  CHECK(forward_configs(DType::bf16, 128, MaskKind::window, false).size() == 88 + 24 + 43);
  int tma_at_96 = 0;
  for (const ForwardConfig& config : forward_configs(DType::bf16, 96, MaskKind::none, false)) {
    CHECK(config.path() != ForwardPath::wgmma);  // the wgmma path offers padded 64 and 128 only
    tma_at_96 += config.path() == ForwardPath::tma ? 1 : 0;  // padded to 128 by whole panels
  }
  CHECK(tma_at_96 == 56 + 24 + 43 + 43);
  for (const ForwardConfig& config : forward_configs(DType::bf16, 56, MaskKind::none, false)) {
    CHECK(config.path() != ForwardPath::tma);  // the TMA path starts at head dim 64
  }
  CHECK(forward_configs(DType::bf16, 100, MaskKind::none, false).empty());
  CHECK(forward_configs(DType::f32, 64, MaskKind::none, false).empty());
  const ForwardConfig first = forward_configs(DType::bf16, 64, MaskKind::none, false).front();
  CHECK(first == ForwardConfig{DType::bf16, 64, 64, 32, 4, 1, MaskKind::none, false});
}

TEST_CASE("the TMA space offers three consumer warpgroups up to a padded head dim of 192") {
  // At 256 a consumer thread's O (128 fp32) and S leave nothing of its 160 registers: ptxas
  // refuses such a kernel (C7602), so the space must not hand it to the autotuner.
  for (int head_dim = 64; head_dim <= 256; head_dim += 16) {
    bool br192 = false;
    for (const ForwardConfig& config :
         forward_configs(DType::bf16, head_dim, MaskKind::none, false)) {
      br192 = br192 || (config.path() == ForwardPath::tma && config.block_m == 192);
    }
    CAPTURE(head_dim);
    CHECK(br192 == (head_dim <= 192));
  }
}

TEST_CASE("the default config is valid, in the space and fits the arch's shared memory") {
  check_default_configs(default_forward_config, forward_configs);
}

TEST_CASE("the default config: the largest tiles that do not spill, two stages where they fit") {
  using Tile = std::array<int, 5>;  // Br, Bc, warps, stages, Q in registers
  auto tile = [](int head_dim, const char* arch) {
    // The mma.sync path's on sm_90a: what runs where TMA cannot read the tensors.
    const ForwardConfig c =
        fallback_forward_config(DType::bf16, head_dim, MaskKind::window, false, arch);
    return Tile{c.block_m, c.block_n, c.warps, c.stages, c.q_in_registers() ? 1 : 0};
  };
  // 32 rows per warp up to head dim 144; Q in registers up to 64.
  CHECK(tile(8, "sm_80") == Tile{128, 64, 4, 2, 1});
  CHECK(tile(64, "sm_80") == Tile{128, 64, 4, 2, 1});
  CHECK(tile(64, "sm_86") == Tile{128, 64, 4, 2, 1});
  CHECK(tile(32, "sm_86") == Tile{128, 64, 4, 2, 1});
  CHECK(tile(72, "sm_80") == Tile{128, 64, 4, 2, 0});
  CHECK(tile(96, "sm_86") == Tile{128, 64, 4, 2, 0});  // 78 KB
  CHECK(tile(96, "sm_90a") == Tile{128, 64, 4, 2, 0});
  // Bc 64 from 104 to 128 only with two stages and not on sm_90: Bc 32 elsewhere.
  CHECK(tile(104, "sm_80") == Tile{128, 64, 4, 2, 0});
  CHECK(tile(128, "sm_80") == Tile{128, 64, 4, 2, 0});
  CHECK(tile(104, "sm_90a") == Tile{128, 32, 4, 2, 0});
  CHECK(tile(128, "sm_86") == Tile{128, 32, 4, 2, 0});  // 68 KB
  CHECK(tile(136, "sm_80") == Tile{128, 32, 4, 2, 0});
  CHECK(tile(144, "sm_90a") == Tile{128, 32, 4, 2, 0});
  CHECK(tile(152, "sm_80") == Tile{128, 64, 8, 2, 0});
  CHECK(tile(192, "sm_80") == Tile{128, 64, 8, 2, 0});
  CHECK(tile(208, "sm_80") == Tile{128, 64, 8, 2, 0});
  CHECK(tile(208, "sm_86") == Tile{128, 32, 8, 1, 0});  // Bc 64 needs 108 KB even with one stage
  CHECK(tile(216, "sm_80") == Tile{128, 32, 8, 2, 0});
  CHECK(tile(256, "sm_80") == Tile{128, 32, 8, 2, 0});
  CHECK(tile(256, "sm_90a") == Tile{128, 32, 8, 2, 0});

  // sm_90a: the TMA path from head dim 64 on, with Bc 64 above 64 and one consumer warpgroup
  // at 256 until setmaxnreg (see tma_default); the wgmma path where TMA cannot read the
  // tensors, at padded head dims 64 and 128.
  // FlashAttention-3's tiles and schedule: overlap, and pingpong between two warpgroups up to
  // 128; smaller Bc with a mask.
  auto hopper = [](int head_dim, MaskKind mask) {
    const ForwardConfig c = default_forward_config(DType::bf16, head_dim, mask, true, "sm_90a");
    return std::pair{c.path(), Tile{c.block_m, c.block_n, c.warps, c.overlap(), c.pingpong()}};
  };
  constexpr MaskKind none = MaskKind::none, window = MaskKind::window;
  CHECK(hopper(48, none).first == ForwardPath::mma_sync);
  CHECK(hopper(64, none) == std::pair{ForwardPath::tma, Tile{128, 128, 12, 1, 1}});
  for (int head_dim : {72, 96, 120, 128}) {
    CAPTURE(head_dim);
    CHECK(hopper(head_dim, none) == std::pair{ForwardPath::tma, Tile{128, 176, 12, 1, 1}});
    CHECK(hopper(head_dim, window) == std::pair{ForwardPath::tma, Tile{128, 128, 12, 1, 1}});
  }
  CHECK(hopper(192, none) == std::pair{ForwardPath::tma, Tile{128, 112, 12, 1, 0}});
  CHECK(hopper(192, window) == std::pair{ForwardPath::tma, Tile{128, 96, 12, 1, 0}});
  CHECK(hopper(256, none) == std::pair{ForwardPath::tma, Tile{128, 80, 12, 1, 0}});
  CHECK(hopper(256, window) == std::pair{ForwardPath::tma, Tile{128, 64, 12, 1, 0}});
  const ForwardConfig without_tma =
      fallback_forward_config(DType::bf16, 128, MaskKind::window, true, "sm_90a");
  CHECK(without_tma.path() == ForwardPath::wgmma);
  CHECK(Tile{without_tma.block_m, without_tma.block_n, without_tma.warps, without_tma.stages, 0} ==
        Tile{128, 128, 8, 1, 0});
  CHECK(default_forward_config(DType::bf16, 128, MaskKind::none, false, "sm_80").path() ==
        ForwardPath::mma_sync);
  CHECK(tile(256, "sm_86") == Tile{128, 32, 8, 1, 0});  // exactly 99 KB
  CHECK(arch_shared_memory_limit("sm_80") == 163 * 1024);
  CHECK(arch_shared_memory_limit("sm_86") == 99 * 1024);
  CHECK(arch_shared_memory_limit("sm_90a") == 227 * 1024);
}

TEST_CASE("forward specs name the traits and read like the config") {
  const ForwardConfig config{DType::bf16, 128, 128, 64, 4, 2, MaskKind::window, true};
  const detail::KernelSpec spec = forward_spec(config, "sm_90a");
  CHECK(spec.op == "attention-forward");
  CHECK(spec.header == "attention/fa2/forward_kernel.cuh");
  CHECK(spec.name_expression ==
        "flashjit::attention_forward_kernel<flashjit::ForwardTraits<flashjit::bfloat16_t, 128, "
        "128, 64, 4, 2, flashjit::MaskKind::window, true, false>>");
  CHECK(spec.readable_name == "attention_forward.hdim128.bf16.window.softcap.br128.bc64.w4.s2");
  CHECK(spec.display_name() ==
        "attention_forward.hdim128.bf16.window.softcap.br128.bc64.w4.s2.sm90a");
  CHECK(spec.arch == "sm_90a");

  const ForwardConfig plain{DType::f16, 64, 64, 32, 4, 1, MaskKind::none, false};
  const detail::KernelSpec plain_spec = forward_spec(plain, "sm_80");
  CHECK(plain_spec.name_expression ==
        "flashjit::attention_forward_kernel<flashjit::ForwardTraits<flashjit::half_t, 64, 64, 32, "
        "4, 1, flashjit::MaskKind::none, false, false>>");
  CHECK(plain_spec.readable_name == "attention_forward.hdim64.fp16.br64.bc32.w4.s1");

  ForwardConfig q_in_registers = plain;
  q_in_registers.fa2().q_in_registers = true;
  const detail::KernelSpec q_spec = forward_spec(q_in_registers, "sm_80");
  CHECK(q_spec.name_expression ==
        "flashjit::attention_forward_kernel<flashjit::ForwardTraits<flashjit::half_t, 64, 64, 32, "
        "4, 1, flashjit::MaskKind::none, false, true>>");
  CHECK(q_spec.readable_name == "attention_forward.hdim64.fp16.br64.bc32.w4.s1.qreg");

  ForwardConfig invalid = plain;
  invalid.warps = 8;  // 64 rows over 8 warps
  check_names([&] { forward_spec(invalid, "sm_80"); }, "config");

  // The Hopper path runs on sm_90a only: its spec for another arch is refused, naming the config.
  ForwardConfig hopper{DType::bf16, 128, 128, 128, 8, 1, MaskKind::none, false};
  hopper.options = WgmmaOptions{};
  REQUIRE(hopper.valid());
  const detail::KernelSpec hopper_spec = forward_spec(hopper, "sm_90a");
  CHECK(hopper_spec.header == "attention/hopper/wgmma_forward_kernel.cuh");
  CHECK(hopper_spec.name_expression ==
        "flashjit::attention_forward_wgmma_kernel<flashjit::WgmmaForwardTraits<"
        "flashjit::bfloat16_t, 128, 128, 128, flashjit::MaskKind::none, false>>");
  CHECK(hopper_spec.readable_name == "attention_forward.hdim128.bf16.br128.bc128.w8.s1.wgmma");
  check_names([&] { forward_spec(hopper, "sm_80"); }, "config");
  ForwardConfig two_stages = hopper;
  two_stages.stages = 2;  // the wgmma path has one K/V stage so far
  CHECK_FALSE(two_stages.valid());

  // The TMA path: warps count the producer warpgroup's 4; stages are the ring's slots.
  ForwardConfig tma{DType::f16, 96, 128, 64, 12, 2, MaskKind::window, true};
  tma.options = TmaOptions{};
  REQUIRE(tma.valid());
  const detail::KernelSpec tma_spec = forward_spec(tma, "sm_90a");
  CHECK(tma_spec.header == "attention/hopper/tma_forward_kernel.cuh");
  CHECK(tma_spec.name_expression ==
        "flashjit::attention_forward_tma_kernel<flashjit::TmaForwardTraits<flashjit::half_t, 96, "
        "128, 64, flashjit::MaskKind::window, true, 2, false, false, false, false>>");
  CHECK(tma_spec.readable_name ==
        "attention_forward.hdim96.fp16.window.softcap.br128.bc64.w12.s2.tma");
  CHECK(tma_spec.threads == 384);
  check_names([&] { forward_spec(tma, "sm_86"); }, "config");
  ForwardConfig tma_warps = tma;
  tma_warps.warps = 8;  // without the producer warpgroup
  CHECK_FALSE(tma_warps.valid());
  ForwardConfig scheduled = tma;
  scheduled.tma().overlap = true;
  scheduled.tma().pingpong = true;
  REQUIRE(scheduled.valid());
  CHECK(forward_spec(scheduled, "sm_90a").name_expression ==
        "flashjit::attention_forward_tma_kernel<flashjit::TmaForwardTraits<flashjit::half_t, 96, "
        "128, 64, flashjit::MaskKind::window, true, 2, true, true, false, false>>");
  CHECK(forward_spec(scheduled, "sm_90a").readable_name ==
        "attention_forward.hdim96.fp16.window.softcap.br128.bc64.w12.s2.tma.overlap.pingpong");
  ForwardConfig persistent = scheduled;
  persistent.tma().persistent = true;  // one CTA per SM walks the tiles
  persistent.stages = 3;
  REQUIRE(persistent.valid());
  CHECK(forward_spec(persistent, "sm_90a").name_expression ==
        "flashjit::attention_forward_tma_kernel<flashjit::TmaForwardTraits<flashjit::half_t, 96, "
        "128, 64, flashjit::MaskKind::window, true, 3, true, true, false, true>>");
  CHECK(forward_spec(persistent, "sm_90a").readable_name ==
        "attention_forward.hdim96.fp16.window.softcap.br128.bc64.w12.s3.tma.overlap.pingpong."
        "persistent");
  persistent.tma().overlap = persistent.tma().pingpong = false;  // persistent needs overlap
  CHECK_FALSE(persistent.valid());
  persistent.stages = 4;  // two or three slots a ring
  persistent.tma().overlap = true;
  CHECK_FALSE(persistent.valid());
  // 2-CTA clusters: unmasked, one CTA per dense tile, the TMA path only.
  ForwardConfig clustered = scheduled;
  clustered.mask = MaskKind::none;
  clustered.tma().cluster = true;
  REQUIRE(clustered.valid());
  CHECK(clustered.cluster_blocks() == 2);
  CHECK(forward_spec(clustered, "sm_90a").name_expression ==
        "flashjit::attention_forward_tma_cluster_kernel<flashjit::TmaForwardTraits<flashjit::"
        "half_t, 96, 128, 64, flashjit::MaskKind::none, true, 2, true, true, false, false, false, "
        "2>>");
  CHECK(forward_spec(clustered, "sm_90a").readable_name ==
        "attention_forward.hdim96.fp16.softcap.br128.bc64.w12.s2.tma.overlap.pingpong.cluster2");
  for (auto off : {+[](ForwardConfig& c) { c.mask = MaskKind::window; },
                   +[](ForwardConfig& c) { c.tma().persistent = true; },
                   +[](ForwardConfig& c) { c.varlen = true; },
                   +[](ForwardConfig& c) { c.options = Fa2Options{}; }}) {
    ForwardConfig refused = clustered;
    off(refused);
    CHECK_FALSE(refused.valid());
    check_names([&] { forward_spec(refused, "sm_90a"); }, "config");
  }
  scheduled.tma().overlap = false;  // pingpong comes with overlap
  CHECK_FALSE(scheduled.valid());
  ForwardConfig pingpong_64 = tma;
  pingpong_64.block_m = 64;
  pingpong_64.warps = 8;
  pingpong_64.tma().overlap = true;
  REQUIRE(pingpong_64.valid());
  pingpong_64.tma().pingpong = true;  // one consumer warpgroup has no one to take turns with
  CHECK_FALSE(pingpong_64.valid());
  // The TMA path's options belong to it: another path's config has none to set.
  ForwardConfig overlap_elsewhere = plain;
  CHECK_THROWS_AS(overlap_elsewhere.tma(), std::bad_variant_access);
  CHECK_FALSE(overlap_elsewhere.overlap());
  ForwardConfig p_in_shared = tma;
  p_in_shared.tma().p_in_shared = true;
  REQUIRE(p_in_shared.valid());
  CHECK(p_in_shared.shared_bytes() == tma.shared_bytes() + 128 * 64 * 2);
  CHECK(forward_spec(p_in_shared, "sm_90a").readable_name ==
        "attention_forward.hdim96.fp16.window.softcap.br128.bc64.w12.s2.tma.pshared");
  p_in_shared.block_n = 80;  // P's tile is whole 64-column swizzle panels
  CHECK_FALSE(p_in_shared.valid());

  // 32 rows per warp at head dim 128: S and O take 160 registers, Q would take 64 more.
  const ForwardConfig wide{DType::bf16, 128, 128, 32, 4, 2, MaskKind::none, false};
  CHECK(wide.valid());
  ForwardConfig wide_q = wide;
  wide_q.fa2().q_in_registers = true;
  CHECK_FALSE(wide_q.valid());
  check_names([&] { forward_spec(wide_q, "sm_80"); }, "config");
}

TEST_CASE("the mask kind is window only when a window limits some row") {
  Attention a = make_attention(1, 1, 1, 100, 200, 64);
  CHECK(forward_mask_kind(a) == MaskKind::none);
  a.causal = true;
  CHECK(forward_mask_kind(a) == MaskKind::window);
  a.seqlen_q = 1;  // decoding: the one query row is the last and sees every key
  CHECK(forward_mask_kind(a) == MaskKind::none);
  a = make_attention(1, 1, 1, 100, 200, 64);
  a.window_left = 198;
  CHECK(forward_mask_kind(a) == MaskKind::window);
  a.window_left = 199;  // the last row reaches key 0
  CHECK(forward_mask_kind(a) == MaskKind::none);
  a.window_right = 98;
  CHECK(forward_mask_kind(a) == MaskKind::window);
  a.window_right = 99;  // row 0 reaches the last key
  CHECK(forward_mask_kind(a) == MaskKind::none);
}

TEST_CASE("forward params fold the scale and translate the mask") {
  ForwardCall call;
  Attention& a = call.attention;
  auto params = [&] { return forward_params(a, call.q, call.k, call.v, call.o, call.lse); };
  constexpr float kLog2e = std::numbers::log2e_v<float>;

  SUBCASE("tensors, sizes and GQA") {
    const AttentionForwardParams p = params();
    CHECK(p.q.data == call.storage->q);
    CHECK(p.q.batch_stride == 16 * 4 * 64);
    CHECK(p.q.row_stride == 4 * 64);
    CHECK(p.q.head_stride == 64);
    CHECK(p.k.data == call.storage->k);
    CHECK(p.k.row_stride == 2 * 64);
    CHECK(p.v.data == call.storage->v);
    CHECK(p.o.data == call.storage->o);
    CHECK(p.lse == call.storage->lse);
    CHECK(p.lse_batch_stride == 4 * 16);
    CHECK(p.lse_head_stride == 16);
    CHECK(p.seqlen_q == 16);
    CHECK(p.seqlen_k == 24);
    CHECK(p.head_dim == 64);
    CHECK(p.heads_per_kv == 2);
    CHECK(p.window_left == kNoWindow);
    CHECK(p.window_right == kNoWindow);
    CHECK(p.score_scale == doctest::Approx(0.125f * kLog2e));
    CHECK(p.softcap_log2 == 0.0f);
  }
  SUBCASE("[B, H, L, D] strides") {
    call.q = attention_tensor(call.storage->q, DType::bf16, Layout::bhsd, 2, 16, 4, 64);
    const AttentionForwardParams p = params();
    CHECK(p.q.batch_stride == 4 * 16 * 64);
    CHECK(p.q.row_stride == 64);
    CHECK(p.q.head_stride == 16 * 64);
  }
  SUBCASE("no lse") {
    call.lse = TensorView{};
    const AttentionForwardParams p = params();
    CHECK(p.lse == nullptr);
  }
  SUBCASE("explicit scale") {
    a.scale = 0.5f;
    CHECK(params().score_scale == doctest::Approx(0.5f * kLog2e));
  }
  SUBCASE("softcap folds the scale into tanh's argument") {
    a.scale = 0.5f;
    a.softcap = 30.0f;
    const AttentionForwardParams p = params();
    CHECK(p.score_scale == doctest::Approx(0.5f / 30.0f));
    CHECK(p.softcap_log2 == doctest::Approx(30.0f * kLog2e));
  }
  SUBCASE("causal is window_right 0 with an unbounded left side") {
    a.causal = true;
    CHECK(params().window_left == kNoWindow);
    CHECK(params().window_right == 0);
    a.window_left = 5;
    CHECK(params().window_left == 5);
    CHECK(params().window_right == 0);
  }
  SUBCASE("sliding window") {
    a.window_left = 7;
    a.window_right = 3;
    CHECK(params().window_left == 7);
    CHECK(params().window_right == 3);
  }
  SUBCASE("windows past every key are unbounded") {
    a.window_left = 1000;
    a.window_right = std::int64_t{1} << 40;
    CHECK(params().window_left == kNoWindow);
    CHECK(params().window_right == kNoWindow);
  }
}

TEST_CASE("the launch covers every query block of every head and batch") {
  const Attention a = make_attention(3, 8, 2, 300, 7, 128);
  const ForwardConfig config{DType::bf16, 128, 128, 64, 4, 2, MaskKind::none, false};
  const detail::LaunchShape shape = forward_launch_shape(config, a, nullptr);
  CHECK(shape.grid_x == 3);
  CHECK(shape.grid_y == 8);
  CHECK(shape.grid_z == 3);
  CHECK(shape.block_x == 128);
  CHECK(shape.block_y == 1);
  CHECK(shape.dynamic_shared_bytes == static_cast<std::size_t>(config.shared_bytes()));
  CHECK(config.shared_bytes() == space::shared_bytes(128, 128, 64, 2));
}

TEST_CASE("the TMA path reads every tensor the forward accepts, and names one it could not") {
  ForwardCall call;
  CHECK(tma_tensor_problem(call.attention, call.q, call.k, call.v, call.o).empty());
  for (Layout layout : {Layout::bshd, Layout::bhsd}) {  // both layouts' strides
    call.q = ForwardCall::tensor(call.storage->q, ForwardCall::kSeqQ, ForwardCall::kHeadsQ, layout);
    call.o = ForwardCall::tensor(call.storage->o, ForwardCall::kSeqQ, ForwardCall::kHeadsQ, layout);
    CHECK(tma_tensor_problem(call.attention, call.q, call.k, call.v, call.o).empty());
  }
  // Validation refuses data off 16 bytes, so this view never reaches a kernel; were it to, the
  // TMA path would name it (and the default choice would take another path).
  call.v.data = reinterpret_cast<std::uint16_t*>(call.v.data) + 4;
  const std::string problem = tma_tensor_problem(call.attention, call.q, call.k, call.v, call.o);
  CHECK(problem.find("v: globalAddress") == 0);
  ForwardConfig tma = default_forward_config(DType::bf16, 64, MaskKind::none, false, "sm_90a");
  REQUIRE(tma.path() == ForwardPath::tma);
  check_names([&] { check_forward_config(tma, call.attention, call.q, call.k, call.v, call.o); },
              "config");
}

TEST_CASE("an explicit config must match the call") {
  ForwardCall call;
  ForwardConfig config = default_forward_config(DType::bf16, 64, MaskKind::none, false, "sm_80");
  auto check = [&] {
    check_forward_config(config, call.attention, call.q, call.k, call.v, call.o);
  };
  CHECK_NOTHROW(check());
  SUBCASE("head dim") {
    config.head_dim = 128;
    config.block_n = 64;
    check_names(check, "config");
  }
  check_config_mismatches(config, call.attention, check);
}

TEST_CASE("attention tensors view both layouts as [batch, seqlen, heads, head_dim]") {
  std::uint16_t data[1];
  const TensorView bshd = attention_tensor(data, DType::f16, Layout::bshd, 2, 5, 3, 16);
  CHECK(bshd.data == data);
  CHECK(bshd.dtype == DType::f16);
  CHECK(bshd.rank == 4);
  CHECK(bshd.shape == std::array<std::int64_t, 4>{2, 5, 3, 16});
  CHECK(bshd.strides == std::array<std::int64_t, 4>{5 * 3 * 16, 3 * 16, 16, 1});
  const TensorView bhsd = attention_tensor(data, DType::bf16, Layout::bhsd, 2, 5, 3, 16);
  CHECK(bhsd.shape == std::array<std::int64_t, 4>{2, 5, 3, 16});
  CHECK(bhsd.strides == std::array<std::int64_t, 4>{3 * 5 * 16, 16, 5 * 16, 1});
  CHECK(bhsd.span_bytes() == bshd.span_bytes());

  float lse_data[1];
  const TensorView lse = lse_tensor(lse_data, make_attention(2, 3, 1, 5, 1, 64));
  CHECK(lse.dtype == DType::f32);
  CHECK(lse.shape == std::array<std::int64_t, 4>{2, 3, 5, 0});
  CHECK(lse.strides == std::array<std::int64_t, 4>{15, 5, 1, 0});

  check_names([&] { attention_tensor(data, DType::f16, Layout::bshd, -3, 5, 3, 16); }, "batch");
  check_names([&] { attention_tensor(data, DType::f16, Layout::bhsd, 2, -1, 3, 16); }, "seqlen");
  check_names(
      [&] { attention_tensor(data, DType::f16, Layout::bhsd, 1 << 30, 1 << 30, 1 << 30, 256); },
      "shape");
  check_names([&] { lse_tensor(lse_data, make_attention(1, -2, 1, 1, 1, 64)); },
              "attention.heads_q");
}

TEST_CASE("attention-forward lists the compile matrix") {
  const OpInfo& op = find_op("attention-forward");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const auto defaults = op.specs(arch, SpecSet::defaults);
    const auto all = op.specs(arch, SpecSet::all);
    const bool hopper = std::string(arch) == "sm_90a";
    // 32 head dims x 2 dtypes x 2 masks, plus softcap at 2 head dims x 2 dtypes x 2 masks,
    // plus the 10 inference layouts' defaults at 6 (head dim, dtype, mask): 128 in both dtypes
    // and masks, 64 and 256 in bf16 without a mask (6 on the mma.sync kernel, 4 on the decode
    // kernel: dense and paged, split and not); on sm_90a an 11th, packed prefill on the TMA
    // kernel. Then the index check, the KV-cache append's 12 (2 dtypes, 3 rotations, a
    // 16-bit or an fp8 cache),
    // decoding over an fp8 cache (paged, split and not, on the mma.sync and decode kernels) at
    // 128 and the unused rows' fill (3
    // element types), the learnable sinks' pass (2 dtypes). Last MLA's absorbed decoding on the
    // wide path (V in the keys and not,
    // split and not): 16 and 128 heads take one tile on sm_80; on sm_90a V in the keys takes
    // the wgmma form whatever the heads, V loaded two mma.sync tiles. On sm_90a also
    // packed prefill over an fp8 cache on the TMA kernel: head dims 64, 128 (with and without
    // the window mask) and 256.
    const std::size_t layouts = hopper ? 11 : 10;
    const std::size_t wide = hopper ? 2 + 4 : 4;
    const std::size_t fp8_prefill = hopper ? 4 : 0;
    CHECK(defaults.size() ==
          32 * 2 * 2 + 2 * 2 * 2 + layouts * 6 + 1 + 12 + 4 + 3 + 2 + wide + fp8_prefill);
    const auto tma_varlen = std::count_if(defaults.begin(), defaults.end(), [](const auto& spec) {
      return spec.readable_name.ends_with(".tma.overlap.pingpong.varlen") ||
             spec.readable_name.ends_with(".tma.overlap.varlen");
    });
    CHECK(tma_varlen == (hopper ? 6 : 0));
    const auto tma_fp8 = std::count_if(defaults.begin(), defaults.end(), [](const auto& spec) {
      return spec.readable_name.find(".tma.") != std::string::npos &&
             spec.readable_name.ends_with(".varlen.kv_e4m3");
    });
    CHECK(tma_fp8 == static_cast<long>(fp8_prefill));
    // On sm_80 every config of bf16 at 64 (34) and 128 (28) with the window mask; on sm_90a
    // the wgmma path's 4 and the TMA path's 123 at 128 with the mask (the mma.sync sweep is
    // sm_80's: the same source); plus the other defaults (the swept head dims' 2 with the mask
    // are among the sweep on sm_80; on sm_90a one, a Hopper default at 128 with the mask).
    CHECK(all.size() == (hopper ? 4 + 123 : 34 + 28) + defaults.size() - (hopper ? 1 : 2));
    std::set<std::string> names;
    for (const auto& spec : all) {
      CHECK(spec.arch == arch);
      CHECK(spec.op == "attention-forward");
      names.insert(spec.readable_name);
    }
    CHECK(names.size() == all.size());
    for (const auto& spec : defaults) CHECK(names.count(spec.readable_name) == 1);
  }
}

TEST_CASE("forward with a value head dim: v and o that wide, the field named out of range") {
  ForwardCall call;
  Attention& a = call.attention;
  a.head_dim_v = 32;
  call.rejects("v.shape");  // still head_dim wide
  call.v = attention_tensor(call.storage->v, DType::bf16, Layout::bshd, ForwardCall::kBatch,
                            ForwardCall::kSeqK, ForwardCall::kHeadsKv, 32);
  call.rejects("o.shape");
  call.o = attention_tensor(call.storage->o, DType::bf16, Layout::bshd, ForwardCall::kBatch,
                            ForwardCall::kSeqQ, ForwardCall::kHeadsQ, 32);
  CHECK_NOTHROW(call.validate());
  for (std::int64_t dim : {-8, 4, 12, 72, 256}) {  // past head_dim (64) included
    a.head_dim_v = dim;
    call.rejects("attention.head_dim_v");
  }
  // With Sequences (a dense batch of them here) too: v and o that wide, an append refused.
  a.head_dim_v = 32;
  CHECK_NOTHROW(
      validate_inference_arguments(a, Sequences{}, call.q, call.k, call.v, call.o, call.lse));
  check_names(
      [&] {
        validate_inference_arguments(a, Sequences{}, call.q, call.k, call.k, call.o, call.lse);
      },
      "v.shape", "head_dim_v");
  using C = ForwardCall;
  std::int32_t cached[C::kBatch] = {8, 8};
  Sequences append;
  append.seqlens_k = TensorView::contiguous(cached, DType::i32, {C::kBatch});
  append.k_new =
      TensorView::contiguous(call.storage->k, DType::bf16, {C::kBatch, 1, C::kHeadsKv, 64});
  append.v_new =  // head_dim wide: the appended values must be head_dim_v wide
      TensorView::contiguous(call.storage->v, DType::bf16, {C::kBatch, 1, C::kHeadsKv, 64});
  check_names(
      [&] { validate_inference_arguments(a, append, call.q, call.k, call.v, call.o, call.lse); },
      "sequences.v_new.shape", "head_dim_v");
  // (Host arrays: the check reads shapes and addresses only, and the new rows may not overlap
  // the cache they are written into.)
  std::vector<std::uint16_t> new_k(C::kBatch * C::kHeadsKv * 64);
  std::vector<std::uint16_t> new_v(C::kBatch * C::kHeadsKv * 32);
  append.k_new = TensorView::contiguous(new_k.data(), DType::bf16, {C::kBatch, 1, C::kHeadsKv, 64});
  append.v_new = TensorView::contiguous(new_v.data(), DType::bf16, {C::kBatch, 1, C::kHeadsKv, 32});
  CHECK_NOTHROW(validate_inference_arguments(a, append, call.q, call.k, call.v, call.o, call.lse));
}
