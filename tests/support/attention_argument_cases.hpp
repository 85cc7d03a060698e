#pragma once
// What the attention forward and backward host tests (tests/ops/test_attention_arguments.cpp,
// test_attention_backward_arguments.cpp) share: a valid call with host buffers of the exact size,
// which each test breaks one argument at a time; the mismatches between an explicit config and a
// call that both ops reject alike; and the checks of an op's heuristic default config.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "flashjit/attention.hpp"
#include "support/argument_cases.hpp"

namespace flashjit::testing {

/// An unmasked attention of these sizes. (Designated initializers that leave fields out trip
/// GCC 12's -Wmissing-field-initializers.)
inline Attention make_attention(std::int64_t batch, std::int64_t heads_q, std::int64_t heads_kv,
                                std::int64_t seqlen_q, std::int64_t seqlen_k,
                                std::int64_t head_dim) {
  Attention attention;
  attention.batch = batch;
  attention.heads_q = heads_q;
  attention.heads_kv = heads_kv;
  attention.seqlen_q = seqlen_q;
  attention.seqlen_k = seqlen_k;
  attention.head_dim = head_dim;
  return attention;
}

/// Turns on every option a valid call may combine: causal with a left window, softcap and an
/// explicit scale.
inline void turn_on_options(Attention& attention) {
  attention.causal = true;
  attention.window_left = 5;
  attention.softcap = 30.0f;
  attention.scale = 0.3f;
}

/// The sizes of AttentionCall: GQA, 4 query heads over 2 key/value heads, seqlen_q != seqlen_k.
struct AttentionCallSizes {
  static constexpr std::int64_t kBatch = 2, kHeadsQ = 4, kHeadsKv = 2, kSeqQ = 16, kSeqK = 24,
                                kDim = 64;
  static constexpr std::int64_t kQElements = kBatch * kSeqQ * kHeadsQ * kDim;
  static constexpr std::int64_t kKvElements = kBatch * kSeqK * kHeadsKv * kDim;
};

/// Host buffers of the exact size for the forward's tensors; the backward's extend them with the
/// gradients'. Aligned beyond the kernels' 16 bytes, so that a view is misaligned only where a
/// test offsets it.
struct ForwardBuffers : AttentionCallSizes {
  alignas(64) std::uint16_t q[kQElements];
  alignas(64) std::uint16_t k[kKvElements];
  alignas(64) std::uint16_t v[kKvElements];
  alignas(64) std::uint16_t o[kQElements];
  alignas(64) float lse[kBatch * kHeadsQ * kSeqQ];
};

/// A valid bf16 call of AttentionCallSizes in the [B, L, H, D] layout: the attention, Q, K, V,
/// O and LSE over `Buffers` (ForwardBuffers or an extension). A test derives its op's `Call`
/// from it, adding `validate()` and any further tensors, and breaks one thing at a time
/// (ArgumentChecks).
template <class Call, class Buffers = ForwardBuffers>
struct AttentionCall : AttentionCallSizes, ArgumentChecks<Call> {
  std::unique_ptr<Buffers> storage = std::make_unique<Buffers>();

  Attention attention = make_attention(kBatch, kHeadsQ, kHeadsKv, kSeqQ, kSeqK, kDim);
  TensorView q = tensor(storage->q, kSeqQ, kHeadsQ);
  TensorView k = tensor(storage->k, kSeqK, kHeadsKv);
  TensorView v = tensor(storage->v, kSeqK, kHeadsKv);
  TensorView o = tensor(storage->o, kSeqQ, kHeadsQ);
  TensorView lse = lse_tensor(storage->lse, attention);

  /// A bf16 view of `seqlen` x `heads` rows of head dim kDim over `data`, for each batch.
  static TensorView tensor(void* data, std::int64_t seqlen, std::int64_t heads,
                           Layout layout = Layout::bshd) {
    return attention_tensor(data, DType::bf16, layout, kBatch, seqlen, heads, kDim);
  }
};

/// Moves a config out of its op's space (Br 96 is in no table).
inline void leave_space(kernels::ForwardConfig& config) { config.block_m = 96; }
inline void leave_space(kernels::BackwardConfig& config) { config.key.block_m = 96; }

/// The mismatches between an explicit `config` (ForwardConfig or BackwardConfig, valid for
/// `attention`) and the call that every op rejects as "config", each in a SUBCASE: its dtype,
/// softcap on or off against the call's, an unmasked kernel for a causal call, a tile outside
/// the space; and the one mismatch allowed, the window kernel running an unmasked call.
/// `check()` runs the op's check on `config` and `attention`, which the subcases change. (The
/// head dim differs per op: changing it needs a tile that op accepts.)
template <class Config>
void check_config_mismatches(Config& config, Attention& attention,
                             const std::function<void()>& check) {
  struct Mismatch {
    const char* name;
    std::function<void()> makes;
  };
  const Mismatch mismatches[] = {
      {"dtype", [&] { config.dtype = DType::f16; }},
      {"softcap on for a call without", [&] { config.softcap = true; }},
      {"softcap off for a call with", [&] { attention.softcap = 20.0f; }},
      {"mask none for a causal call", [&] { attention.causal = true; }},
      {"outside the space", [&] { leave_space(config); }},
  };
  for (const Mismatch& mismatch : mismatches) {
    SUBCASE(mismatch.name) {  // told apart by name: they share this line
      mismatch.makes();
      check_names(check, "config");
    }
  }
  SUBCASE("the window kernel runs an unmasked call") {
    config.mask = MaskKind::window;
    CHECK_NOTHROW(check());
  }
}

/// Checks an op's heuristic default (`default_config`: default_forward_config, say) for every
/// arch, head dim, dtype, mask and softcap: valid, one of the op's space (`configs`), within the
/// arch's shared memory; and a head dim, dtype or arch the op lacks is an error naming it.
template <class Config>
void check_default_configs(Config (*default_config)(DType, int, MaskKind, bool, const std::string&),
                           std::vector<Config> (*configs)(DType, int, MaskKind, bool)) {
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90a", "sm_120"}) {
    for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
      for (DType dtype : {DType::f16, DType::bf16}) {
        for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
          for (bool softcap : {false, true}) {
            const Config config = default_config(dtype, head_dim, mask, softcap, arch);
            const std::vector<Config> space = configs(dtype, head_dim, mask, softcap);
            CHECK(config.valid());
            CHECK(std::find(space.begin(), space.end(), config) != space.end());
            CHECK_MESSAGE(config.shared_bytes() <= kernels::arch_shared_memory_limit(arch),
                          arch << " head dim " << head_dim);
          }
        }
      }
    }
  }
  const MaskKind none = MaskKind::none;
  check_names([&] { default_config(DType::bf16, 100, none, false, "sm_80"); }, "head_dim");
  check_names([&] { default_config(DType::f32, 64, none, false, "sm_80"); }, "dtype");
  check_names([&] { default_config(DType::bf16, 64, none, false, "sm_75"); }, "arch");
}

}  // namespace flashjit::testing
