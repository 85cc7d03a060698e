// The host side of the attention backward op: every bad argument is a named InvalidArgument,
// good ones pass; the config space, the heuristic default, spec names (and the dK/dV split
// above head dim 64), the kernels' arguments, launch shapes and the op's compile matrix.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "flashjit/error.hpp"
#include "kernels/attention_backward.hpp"
#include "kernels/op_registry.hpp"

using namespace flashjit;
using namespace flashjit::kernels;
namespace space = flashjit::attention_backward_space;

namespace {

// Throws unless `call` raises InvalidArgument naming `argument`.
void check_names(const std::function<void()>& call, const std::string& argument) {
  try {
    call();
    FAIL("no error; expected one naming " << argument);
  } catch (const InvalidArgument& error) {
    CHECK_MESSAGE(error.argument() == argument, error.what());
    CHECK(std::string(error.what()).find(argument) != std::string::npos);
  }
}

// A valid GQA call (4 query heads over 2 key/value heads) with host buffers of the exact size,
// in the [B, L, H, D] layout. Tests break one thing at a time.
struct BackwardCall {
  static constexpr std::int64_t kBatch = 2, kHeadsQ = 4, kHeadsKv = 2, kSeqQ = 16, kSeqK = 24,
                                kDim = 64;
  static constexpr std::int64_t kQElements = kBatch * kSeqQ * kHeadsQ * kDim;
  static constexpr std::int64_t kKvElements = kBatch * kSeqK * kHeadsKv * kDim;

  struct Storage {
    alignas(64) std::uint16_t q[kQElements];
    alignas(64) std::uint16_t k[kKvElements];
    alignas(64) std::uint16_t v[kKvElements];
    alignas(64) std::uint16_t o[kQElements];
    alignas(64) float lse[kBatch * kHeadsQ * kSeqQ];
    alignas(64) std::uint16_t dout[kQElements];
    alignas(64) std::uint16_t dq[kQElements];
    alignas(64) std::uint16_t dk[kKvElements];
    alignas(64) std::uint16_t dv[kKvElements];
  };
  std::unique_ptr<Storage> storage = std::make_unique<Storage>();

  Attention attention = make_attention();
  TensorView q = tensor(storage->q, kSeqQ, kHeadsQ);
  TensorView k = tensor(storage->k, kSeqK, kHeadsKv);
  TensorView v = tensor(storage->v, kSeqK, kHeadsKv);
  TensorView o = tensor(storage->o, kSeqQ, kHeadsQ);
  TensorView lse = lse_tensor(storage->lse, attention);
  TensorView dout = tensor(storage->dout, kSeqQ, kHeadsQ);
  TensorView dq = tensor(storage->dq, kSeqQ, kHeadsQ);
  TensorView dk = tensor(storage->dk, kSeqK, kHeadsKv);
  TensorView dv = tensor(storage->dv, kSeqK, kHeadsKv);

  // (Designated initializers that leave fields out trip GCC 12's -Wmissing-field-initializers.)
  static Attention make_attention() {
    Attention attention;
    attention.batch = kBatch;
    attention.heads_q = kHeadsQ;
    attention.heads_kv = kHeadsKv;
    attention.seqlen_q = kSeqQ;
    attention.seqlen_k = kSeqK;
    attention.head_dim = kDim;
    return attention;
  }
  static TensorView tensor(void* data, std::int64_t seqlen, std::int64_t heads,
                           Layout layout = Layout::bshd) {
    return attention_tensor(data, DType::bf16, layout, kBatch, seqlen, heads, kDim);
  }
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
    call.attention.causal = true;
    call.attention.window_left = 5;
    call.attention.softcap = 30.0f;
    call.attention.scale = 0.3f;
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
  auto rejects = [&](const std::string& argument) {
    check_names([&] { call.validate(); }, argument);
  };
  SUBCASE("attention fields") {
    call.attention.batch = 0;
    rejects("attention.batch");
    call.attention.batch = BackwardCall::kBatch;
    call.attention.head_dim = 100;
    rejects("attention.head_dim");
    call.attention.head_dim = BackwardCall::kDim;
    call.attention.heads_kv = 3;
    rejects("attention.heads_kv");
    call.attention.heads_kv = BackwardCall::kHeadsKv;
    call.attention.causal = true;
    call.attention.window_right = 2;
    rejects("attention.window_right");
  }
  SUBCASE("scales") {
    call.attention.softcap = -1.0f;
    rejects("attention.softcap");
    call.attention.softcap = 0.0f;
    call.attention.scale = 0.0f;
    rejects("attention.scale");
  }
  SUBCASE("null inputs") {
    call.k.data = nullptr;
    rejects("k");
  }
  SUBCASE("input dtypes") {
    for (TensorView* view : call.all_16_bit()) view->dtype = DType::f32;
    rejects("q.dtype");
  }
  SUBCASE("input shapes") {
    call.v.shape[1] = 16;
    rejects("v.shape");
  }
  SUBCASE("input strides") {
    call.q.strides[1] = 132;
    rejects("q.strides");
  }
  SUBCASE("misaligned input") {
    call.o.data = reinterpret_cast<char*>(call.storage->o) + 2;
    rejects("o");
  }
  SUBCASE("lse") {
    SUBCASE("dtype") {
      call.lse.dtype = DType::bf16;
      rejects("lse.dtype");
    }
    SUBCASE("shape") {
      call.lse.shape[2] = 15;
      rejects("lse.shape");
    }
    SUBCASE("rank") {
      call.lse.rank = 2;
      rejects("lse.rank");
    }
    SUBCASE("row stride not 1") {
      call.lse.strides = {128, 16, 2, 0};
      call.attention.seqlen_q = 8;
      call.lse.shape = {2, 4, 8, 0};
      for (TensorView* view : {&call.q, &call.o, &call.dout, &call.dq}) view->shape[1] = 8;
      rejects("lse.strides");
    }
  }
}

TEST_CASE("backward needs the forward pass's lse") {
  BackwardCall call;
  SUBCASE("a null view") { call.lse = TensorView{}; }
  SUBCASE("null data with a valid shape") { call.lse.data = nullptr; }
  check_names([&] { call.validate(); }, "lse");
}

TEST_CASE("backward rejects bad gradient tensors by name") {
  BackwardCall call;
  auto rejects = [&](const std::string& argument) {
    check_names([&] { call.validate(); }, argument);
  };
  SUBCASE("null pointers") {
    SUBCASE("dout") {
      call.dout.data = nullptr;
      rejects("dout");
    }
    SUBCASE("dq") {
      call.dq.data = nullptr;
      rejects("dq");
    }
    SUBCASE("dk") {
      call.dk.data = nullptr;
      rejects("dk");
    }
    SUBCASE("dv") {
      call.dv.data = nullptr;
      rejects("dv");
    }
  }
  SUBCASE("rank") {
    call.dk.rank = 3;
    rejects("dk.rank");
  }
  SUBCASE("dtypes differ from q") {
    SUBCASE("dout") {
      call.dout.dtype = DType::f16;
      rejects("dout.dtype");
    }
    SUBCASE("dq") {
      call.dq.dtype = DType::f32;
      rejects("dq.dtype");
    }
    SUBCASE("dk") {
      call.dk.dtype = DType::f16;
      rejects("dk.dtype");
    }
    SUBCASE("dv") {
      call.dv.dtype = DType::f16;
      rejects("dv.dtype");
    }
  }
  SUBCASE("shapes") {
    SUBCASE("dout like o") {
      call.dout.shape[1] = BackwardCall::kSeqK;
      rejects("dout.shape");
    }
    SUBCASE("dq like q") {
      call.dq.shape[2] = BackwardCall::kHeadsKv;
      rejects("dq.shape");
    }
    SUBCASE("dk like k, not like q") {
      call.dk.shape = call.q.shape;
      rejects("dk.shape");
    }
    SUBCASE("dv head dim") {
      call.dv.shape[3] = 32;
      rejects("dv.shape");
    }
    SUBCASE("zero size") {
      call.dq.shape[0] = 0;
      rejects("dq.shape");
    }
  }
  SUBCASE("strides") {
    SUBCASE("head_dim stride not 1") {
      call.dq.strides[3] = 2;
      rejects("dq.strides");
    }
    SUBCASE("row stride not a multiple of 8") {
      call.dout.strides[1] = 260;
      rejects("dout.strides");
    }
    SUBCASE("head stride not a multiple of 8") {
      call.dv.strides[2] = 68;
      rejects("dv.strides");
    }
    SUBCASE("negative") {
      call.dk.strides[0] = -3072;
      rejects("dk.strides");
    }
  }
  SUBCASE("not 16-byte aligned") {
    call.dq.data = call.storage->dq + 4;
    for (TensorView* view : call.all_16_bit()) view->shape[0] = 1;  // stay inside the buffers
    call.attention.batch = 1;
    call.lse = lse_tensor(call.storage->lse, call.attention);
    rejects("dq");
  }
}

TEST_CASE("backward outputs overlap no input and no other output") {
  BackwardCall call;
  auto rejects = [&](const std::string& argument) {
    check_names([&] { call.validate(); }, argument);
  };
  SUBCASE("dq is q") {
    call.dq = call.q;
    rejects("dq");
  }
  SUBCASE("dq overlaps dout (in place)") {
    call.dq.data = call.storage->dout;
    rejects("dq");
  }
  SUBCASE("dq overlaps o") {
    call.dq.data = call.storage->o + 64;
    rejects("dq");
  }
  SUBCASE("dk overlaps lse") {
    call.dk.data = call.storage->lse;
    rejects("dk");
  }
  SUBCASE("dk is k") {
    call.dk = call.k;
    rejects("dk");
  }
  SUBCASE("dv overlaps v") {
    call.dv.data = call.storage->v + 8;
    rejects("dv");
  }
  SUBCASE("dk and dv are one tensor") {
    call.dv = call.dk;
    rejects("dk");
  }
  SUBCASE("dq overlaps dk") {
    call.dq.data = call.storage->dk;
    rejects("dq");
  }
  SUBCASE("dk rows overlapping each other") {
    call.dk.strides[1] = 8;
    rejects("dk.strides");
  }
  SUBCASE("dv broadcast over the batch") {
    call.dv.strides[0] = 0;
    rejects("dv.strides");
  }
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
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90a", "sm_120"}) {
    for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
      for (DType dtype : {DType::f16, DType::bf16}) {
        for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
          for (bool softcap : {false, true}) {
            const BackwardConfig config =
                default_backward_config(dtype, head_dim, mask, softcap, arch);
            const auto configs = backward_configs(dtype, head_dim, mask, softcap);
            CHECK(config.valid());
            CHECK(std::find(configs.begin(), configs.end(), config) != configs.end());
            CHECK_MESSAGE(config.shared_bytes() <= arch_shared_memory_limit(arch),
                          arch << " head dim " << head_dim);
          }
        }
      }
    }
  }
  check_names([] { default_backward_config(DType::bf16, 100, MaskKind::none, false, "sm_80"); },
              "head_dim");
  check_names([] { default_backward_config(DType::f32, 64, MaskKind::none, false, "sm_80"); },
              "dtype");
  check_names([] { default_backward_config(DType::bf16, 64, MaskKind::none, false, "sm_75"); },
              "arch");
}

TEST_CASE("the default backward config: 64 x 64 tiles, 32 x 32 where those spill or do not fit") {
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
  // Head dims where only another tile avoids spilling on one arch.
  CHECK(tile(16, "sm_80") == Tile{128, 128, 8});
  CHECK(tile(16, "sm_90a") == Tile{64, 64, 4});
  CHECK(tile(16, "sm_80", true) == Tile{64, 64, 4});
  CHECK(tile(136, "sm_90a") == Tile{32, 32, 2});
  CHECK(tile(136, "sm_80") == Tile{64, 64, 4});
  CHECK(tile(168, "sm_80") == Tile{64, 64, 4});
  CHECK(tile(168, "sm_90a") == Tile{32, 32, 2});
  CHECK(tile(184, "sm_80") == Tile{64, 64, 4});
  CHECK(tile(184, "sm_89") == Tile{32, 32, 2});  // the override is sm_80's; 64 x 64 needs 138 KB
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
      "flashjit::attention_forward_space::MaskKind::window, false, "
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
        "32, 32, 2, flashjit::attention_forward_space::MaskKind::none, true, "
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
  CHECK_NOTHROW(check_backward_config(config, call.attention, call.q));
  auto rejects = [&] {
    check_names([&] { check_backward_config(config, call.attention, call.q); }, "config");
  };
  SUBCASE("dtype") {
    config.dtype = DType::f16;
    rejects();
  }
  SUBCASE("head dim") {
    config.head_dim = 128;
    config.block_m = config.block_n = 32;
    config.warps = 2;
    rejects();
  }
  SUBCASE("softcap on for a call without") {
    config.softcap = true;
    rejects();
  }
  SUBCASE("softcap off for a call with") {
    call.attention.softcap = 20.0f;
    rejects();
  }
  SUBCASE("mask none for a causal call") {
    call.attention.causal = true;
    rejects();
  }
  SUBCASE("outside the space") {
    config.block_m = 96;
    rejects();
  }
  SUBCASE("the window kernels run an unmasked call") {
    config.mask = MaskKind::window;
    CHECK_NOTHROW(check_backward_config(config, call.attention, call.q));
  }
  SUBCASE("attention_backward checks arguments and config before it allocates or launches") {
    Runtime runtime({.device = 0, .backend = Backend::emulator});
    config.dtype = DType::f16;
    check_names(
        [&] {
          attention_backward(runtime, call.attention, call.q, call.k, call.v, call.o, call.lse,
                             call.dout, call.dq, call.dk, call.dv, config, nullptr);
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
  Attention a = BackwardCall::make_attention();
  a.batch = 3;
  a.heads_q = 8;
  a.heads_kv = 2;
  a.seqlen_q = 301;
  a.seqlen_k = 65;
  a.head_dim = 128;
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
