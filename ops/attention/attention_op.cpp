// Attention's entries in the op registry: the forward (with the inference forms and decoding)
// and the backward, each with its compile matrix and its tuned ops.
#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>

#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "attention/emulated/backward_shares.hpp"
#include "attention/emulated/forward_shares.hpp"
#include "attention/inference/attention_inference.hpp"
#include "attention/inference/kvcache_append.hpp"
#include "attention/inference/unused_rows.hpp"
#include "attention/sinks/attention_sinks.hpp"
#include "common/op_registry.hpp"

namespace flashjit::kernels {
namespace {

// The forward op's compile matrix. Every config is swept for bf16 with the window mask at the
// two head dims most models use (the Hopper paths' at one of them); every other (head dim,
// dtype, mask) gets its heuristic default, which is what runs without tuning. Softcap defaults are
// added for the head dims of the models that use it (Grok: 128, Gemma 2: 256).
constexpr int kSweptHeadDims[] = {64, 128};
constexpr int kSoftcapHeadDims[] = {128, 256};
constexpr MaskKind kMaskKinds[] = {MaskKind::none, MaskKind::window};

std::vector<ForwardConfig> attention_forward_defaults(const std::string& arch) {
  std::vector<ForwardConfig> configs;
  for (int head_dim = attention_forward_space::kMinHeadDim;
       head_dim <= attention_forward_space::kMaxHeadDim; head_dim += 8) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      for (MaskKind mask : kMaskKinds) {
        configs.push_back(default_forward_config(dtype, head_dim, mask, false, arch));
      }
    }
  }
  for (int head_dim : kSoftcapHeadDims) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      for (MaskKind mask : kMaskKinds) {
        configs.push_back(default_forward_config(dtype, head_dim, mask, true, arch));
      }
    }
  }
  return configs;
}

// The inference layouts' defaults (ops/attention/inference/attention_inference.cpp): every layout
// at head dim 128 in both dtypes and masks, and bf16 without a mask at 64 and 256, so each path of
// forward_rows.cuh and parts/forward_block.cuh compiles for the GPU and its registers are checked.
struct InferenceHeadDim {
  int head_dim;
  bool fp16;
  bool masks;
};
constexpr InferenceHeadDim kInferenceHeadDims[] = {
    {64, false, false}, {128, true, true}, {256, false, false}};

// The mma.sync and Hopper spaces swept for the compile matrix (SpecSet::all only).
std::vector<ForwardConfig> swept_forward_configs(const std::string& arch, SpecSet set) {
  std::vector<ForwardConfig> configs;
  if (set == SpecSet::all) {
    // Swept with the window mask, whose masked blocks add their code to the unmasked path (each
    // unmasked default compiles below). The mma.sync space is swept on sm_80; on sm_90a the same
    // source gets its defaults only (and `autotune --plan`'s test compiles head dim 64's whole
    // unmasked space there). The Hopper paths' larger space is swept at head dim 128. All three
    // keep CI within its time.
    for (int head_dim : kSweptHeadDims) {
      for (const ForwardConfig& config :
           forward_configs(DType::bf16, head_dim, MaskKind::window, false)) {
        const bool hopper = config.path() != ForwardPath::mma_sync;
        if (hopper && head_dim != 128) continue;
        if (!hopper && runs_wgmma(arch)) continue;
        if (runs_on(config, arch)) configs.push_back(config);
      }
    }
  }
  return configs;
}

// The inference paths' defaults at each row of kInferenceHeadDims, every mask and dtype it names.
void add_inference_defaults(const std::string& arch, std::vector<ForwardConfig>& defaults) {
  for (const InferenceHeadDim& row : kInferenceHeadDims) {
    for (MaskKind mask : kMaskKinds) {
      if (mask == MaskKind::window && !row.masks) continue;
      for (DType dtype : {DType::bf16, DType::f16}) {
        if (dtype == DType::f16 && !row.fp16) continue;
        for (const ForwardConfig& config :
             inference_forward_configs(dtype, row.head_dim, mask, arch)) {
          defaults.push_back(config);
        }
      }
    }
  }
}

// The fp8 caches' kernels (decoding and packed prefill) and MLA's wide decoding.
void add_cache_form_defaults(const std::string& arch, std::vector<ForwardConfig>& defaults) {
  // Decoding over an fp8 cache (paged, split and not) at head dim 128, on the mma.sync and the
  // decode kernels: the staging rings and their conversion compile for the GPU, in registers.
  const std::optional<ForwardConfig> fp8_decode =
      decode_forward_config(DType::bf16, 128, MaskKind::none, false, arch, 16, true);
  for (ForwardConfig config : inference_forward_configs(DType::bf16, 128, MaskKind::none, arch)) {
    if (!config.paged || !config.pack_gqa) continue;
    if (config.path() == ForwardPath::decode) {
      if (!fp8_decode) continue;
      config.stages = fp8_decode->stages;
    } else {
      config.stages = 2;
    }
    config.kv_e4m3 = true;
    if (config.valid()) defaults.push_back(config);
  }
  // Packed prefill over an fp8 cache on sm_90a's TMA kernel (head dims 64, 128 and 256, and
  // the window mask at 128): the producer warpgroup's conversion fits the registers it keeps.
  for (int head_dim : {64, 128, 256}) {
    for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
      if (mask == MaskKind::window && head_dim != 128) continue;
      if (auto tma = packed_prefill_tma_config(DType::bf16, head_dim, mask, false, arch, true)) {
        defaults.push_back(*tma);
      }
    }
  }
  // MLA's absorbed decoding on the wide path (576/512, paged, GQA-packed, split and not), V in
  // the keys and loaded, for 16 and 128 heads (whose tiles differ where shared memory allows).
  for (const std::int64_t rows : {16, 128}) {
    for (const bool in_keys : {true, false}) {
      for (const bool split : {false, true}) {
        ForwardConfig config =
            wide_forward_config(DType::bf16, 576, 512, MaskKind::none, false, in_keys, arch, rows);
        config.varlen = config.paged = config.pack_gqa = true;
        config.split = split;
        defaults.push_back(config);
      }
    }
  }
}

std::vector<detail::KernelSpec> attention_forward_specs(const std::string& arch, SpecSet set) {
  std::vector<ForwardConfig> configs = swept_forward_configs(arch, set);
  // The sweep already holds the swept head dims' defaults; list each kernel once.
  std::vector<ForwardConfig> defaults = attention_forward_defaults(arch);
  add_inference_defaults(arch, defaults);
  add_cache_form_defaults(arch, defaults);
  for (const ForwardConfig& config : defaults) {
    if (std::find(configs.begin(), configs.end(), config) == configs.end()) {
      configs.push_back(config);
    }
  }
  std::vector<detail::KernelSpec> specs;
  for (const ForwardConfig& config : configs) specs.push_back(forward_spec(config, arch));
  specs.push_back(index_check_spec(arch));  // the inference calls' device-side index check
  for (const detail::KernelSpec& spec : kvcache_append_specs(arch)) specs.push_back(spec);
  for (const detail::KernelSpec& spec : unused_rows_specs(arch)) specs.push_back(spec);
  for (const detail::KernelSpec& spec : sinks_specs(arch)) {
    if (spec.op == "attention-forward") specs.push_back(spec);
  }
  return specs;
}

// The backward op's compile matrix, chosen like the forward's: at head dims 64 and 128 in bf16
// (the window mask, no softcap) every dK/dV tile of the default mode, and every dQ tile beside
// the deterministic default's dK/dV tile; and the default of every other (head dim, dtype, mask,
// mode), with softcap at the forward's softcap head dims.
std::vector<BackwardConfig> attention_backward_configs(const std::string& arch, SpecSet set) {
  std::vector<BackwardConfig> configs;
  auto add = [&](const BackwardConfig& config) {
    if (std::find(configs.begin(), configs.end(), config) == configs.end()) {
      configs.push_back(config);
    }
  };
  // The sweep of the mma.sync tiles on sm_80 only (sm_90a compiles the same source); sm_90a's
  // defaults, the TMA backward among them, are listed below.
  if (set == SpecSet::all && !runs_wgmma(arch)) {
    for (int head_dim : kSweptHeadDims) {
      for (MaskKind mask : {MaskKind::window}) {
        for (const BackwardConfig& config :
             backward_configs(DType::bf16, head_dim, mask, false, false)) {
          if (runs_on(config, arch)) add(config);
        }
        const BackwardConfig deterministic =
            default_backward_config(DType::bf16, head_dim, mask, false, true, arch);
        for (const BackwardConfig& config :
             backward_configs(DType::bf16, head_dim, mask, false, true)) {
          if (config.key == deterministic.key) add(config);
        }
      }
    }
  }
  auto add_defaults = [&](DType dtype, int head_dim, MaskKind mask, bool softcap) {
    for (bool deterministic : {false, true}) {
      add(default_backward_config(dtype, head_dim, mask, softcap, deterministic, arch));
    }
  };
  for (int head_dim = attention_forward_space::kMinHeadDim;
       head_dim <= attention_forward_space::kMaxHeadDim; head_dim += 8) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      for (MaskKind mask : kMaskKinds) add_defaults(dtype, head_dim, mask, false);
    }
  }
  for (int head_dim : kSoftcapHeadDims) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      for (MaskKind mask : kMaskKinds) add_defaults(dtype, head_dim, mask, true);
    }
  }
  // Variable-length batches (Varlen specializations) at the swept head dims, both modes.
  for (int head_dim : kSweptHeadDims) {
    for (MaskKind mask : kMaskKinds) {
      for (bool deterministic : {false, true}) {
        BackwardConfig config =
            fallback_backward_config(DType::bf16, head_dim, mask, false, deterministic, arch);
        config.varlen = true;
        add(config);
      }
    }
  }
  return configs;
}

// Every kernel the listed configs launch, each once: the configs of a dtype share its delta and
// dQ-convert kernels, a deterministic config's dK/dV kernel is shared by its dQ tiles.
std::vector<detail::KernelSpec> attention_backward_specs(const std::string& arch, SpecSet set) {
  std::vector<detail::KernelSpec> specs;
  std::unordered_set<std::string> listed;
  for (const BackwardConfig& config : attention_backward_configs(arch, set)) {
    for (const detail::KernelSpec& spec : backward_specs(config, arch).in_order()) {
      if (listed.insert(spec.readable_name).second) specs.push_back(spec);
    }
  }
  for (const detail::KernelSpec& spec : sinks_specs(arch)) {
    if (spec.op == "attention-backward") specs.push_back(spec);
  }
  return specs;
}

}  // namespace

OpInfo attention_forward_op() {
  return {"attention-forward",
          "FlashAttention-2 forward (causal, sliding window, GQA, softcap), fp16/bf16",
          attention_forward_specs,
          {"attention-forward", "attention-decode"},
          [](detail::EmulatedKernelTable& table) {
            emulated::add_forward_kernels_hdim8_to_40(table);
            emulated::add_forward_kernels_hdim64(table);
            emulated::add_forward_kernels_hdim64_alternatives(table);
            emulated::add_forward_kernels_hdim80_96(table);
            emulated::add_forward_kernels_hdim128(table);
            emulated::add_forward_kernels_hdim128_alternatives(table);
            emulated::add_forward_kernels_hdim256(table);
            emulated::add_kvcache_append_kernels(table);
            emulated::add_unused_rows_kernels(table);
            emulated::add_sinks_kernels(table);
          }};
}

OpInfo attention_backward_op() {
  return {"attention-backward",
          "FlashAttention-2 backward (dK, dV and atomic dQ in one kernel; or deterministic, dQ in "
          "its own), fp16/bf16",
          attention_backward_specs,
          {"attention-backward"},
          [](detail::EmulatedKernelTable& table) {
            emulated::add_backward_kernels_hdim8_40(table);
            emulated::add_backward_kernels_hdim64(table);
            emulated::add_backward_kernels_hdim128(table);
            emulated::add_backward_kernels_hdim256(table);
            emulated::add_backward_kernels_softcap(table);
          }};
}

}  // namespace flashjit::kernels
