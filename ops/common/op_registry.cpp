#include "common/op_registry.hpp"

#include <algorithm>
#include <unordered_set>

#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "attention/attention_inference.hpp"
#include "flashjit/error.hpp"
#include "layer_norm/layer_norm.hpp"
#include "layer_norm/layer_norm_space.cuh"
#include "merge_states/merge_states.hpp"
#include "merge_states/merge_states_space.cuh"
#include "multiscale/multiscale_attention.hpp"
#include "softmax/softmax.hpp"
#include "softmax/softmax_space.cuh"

namespace flashjit::kernels {
namespace {

std::vector<detail::KernelSpec> softmax_specs(const std::string& arch, SpecSet set) {
  std::vector<SoftmaxConfig> configs;
  if (set == SpecSet::all) {
    configs = softmax_configs();
  } else {
    for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
      for (int max_cols : softmax_space::kMaxColsBuckets) {
        // The default for the bucket's widest row; the open bucket takes rows longer than all.
        constexpr int kLongerThanAnyBucket = 1 << 30;
        configs.push_back(
            default_softmax_config(dtype, max_cols != 0 ? max_cols : kLongerThanAnyBucket));
      }
    }
  }
  std::vector<detail::KernelSpec> specs;
  for (const SoftmaxConfig& config : configs) specs.push_back(softmax_spec(config, arch));
  return specs;
}

// The merge's compile matrix: every config, or the default of every (form, dtype pair, head
// dim), each once (head dims share defaults by the width the threads cover).
std::vector<detail::KernelSpec> merge_states_specs(const std::string& arch, SpecSet set) {
  std::vector<MergeStatesConfig> configs;
  for (const MergeStatesConfig& config : merge_states_configs()) {
    if (set == SpecSet::all) {
      configs.push_back(config);
      continue;
    }
    for (int head_dim = 1; head_dim <= merge_states_space::kMaxHeadDim; ++head_dim) {
      const MergeStatesConfig chosen =
          default_merge_states_config(config.input, config.output, head_dim, config.in_place);
      if (chosen == config) {
        configs.push_back(config);
        break;
      }
    }
  }
  std::vector<detail::KernelSpec> specs;
  for (const MergeStatesConfig& config : configs) specs.push_back(merge_states_spec(config, arch));
  return specs;
}

// The layer norm's compile matrix: every config, or the default of every (dtype, norm, row-length
// bucket), each as the forward and the backward row kernel, and the backward's parameter-gradient
// kernel of every dtype.
std::vector<detail::KernelSpec> layer_norm_specs(const std::string& arch, SpecSet set) {
  std::vector<LayerNormConfig> configs;
  if (set == SpecSet::all) {
    configs = layer_norm_configs();
  } else {
    for (const LayerNormConfig& config : layer_norm_configs()) {
      const LayerNormConfig chosen = default_layer_norm_config(
          config.dtype, config.rms,
          config.max_cols != 0 ? config.max_cols : layer_norm_space::kMaxCols);
      if (std::find(configs.begin(), configs.end(), chosen) == configs.end()) {
        configs.push_back(chosen);
      }
    }
  }
  std::vector<detail::KernelSpec> specs;
  for (const LayerNormConfig& config : configs) {
    specs.push_back(layer_norm_spec(config, arch));
    specs.push_back(layer_norm_backward_spec(config, arch));
  }
  for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
    specs.push_back(layer_norm_param_grad_spec(dtype, arch));
  }
  return specs;
}

// The forward op's compile matrix. Every config is swept for bf16 at the two head dims most
// models use (the Hopper paths' at one of them); every other (head dim, dtype, mask) gets its
// heuristic default, which is what runs without tuning. Softcap defaults are added for the head
// dims of the models that use it (Grok: 128, Gemma 2: 256).
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

// The inference layouts' defaults (ops/attention/attention_inference.cpp): every layout at head dim
// 128 in both dtypes and masks, and bf16 without a mask at 64 and 256, so each path of
// forward_block.cuh compiles for the GPU and its registers are checked.
struct InferenceHeadDim {
  int head_dim;
  bool fp16;
  bool masks;
};
constexpr InferenceHeadDim kInferenceHeadDims[] = {
    {64, false, false}, {128, true, true}, {256, false, false}};

std::vector<detail::KernelSpec> attention_forward_specs(const std::string& arch, SpecSet set) {
  std::vector<ForwardConfig> configs;
  if (set == SpecSet::all) {
    for (int head_dim : kSweptHeadDims) {
      for (MaskKind mask : kMaskKinds) {
        for (const ForwardConfig& config : forward_configs(DType::bf16, head_dim, mask, false)) {
          // The mma.sync space is swept on sm_80; on sm_90a the same source gets its defaults
          // only (and `autotune --plan`'s test compiles head dim 64's whole space there). The
          // Hopper paths' larger space is swept once, at head dim 128 with a mask. Both keep CI
          // within its time.
          const bool hopper = config.path != ForwardPath::mma_sync;
          if (hopper && (mask != MaskKind::window || head_dim != 128)) continue;
          if (!hopper && runs_wgmma(arch)) continue;
          if (runs_on(config, arch)) configs.push_back(config);
        }
      }
    }
  }
  // The sweep already holds the swept head dims' defaults; list each kernel once.
  std::vector<ForwardConfig> defaults = attention_forward_defaults(arch);
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
  for (const ForwardConfig& config : defaults) {
    if (std::find(configs.begin(), configs.end(), config) == configs.end()) {
      configs.push_back(config);
    }
  }
  std::vector<detail::KernelSpec> specs;
  for (const ForwardConfig& config : configs) specs.push_back(forward_spec(config, arch));
  specs.push_back(index_check_spec(arch));  // the inference calls' device-side index check
  return specs;
}

// The backward op's compile matrix, chosen like the forward's: at head dims 64 and 128 in bf16
// (both masks, no softcap) every dK/dV tile of the default mode, and every dQ tile beside the
// deterministic default's dK/dV tile; and the default of every other (head dim, dtype, mask,
// mode), with softcap at the forward's softcap head dims.
std::vector<BackwardConfig> attention_backward_configs(const std::string& arch, SpecSet set) {
  std::vector<BackwardConfig> configs;
  auto add = [&](const BackwardConfig& config) {
    if (std::find(configs.begin(), configs.end(), config) == configs.end()) {
      configs.push_back(config);
    }
  };
  // The sweep on sm_80 only: on sm_90a the backward is the same mma.sync source, whose
  // defaults are listed below.
  if (set == SpecSet::all && !runs_wgmma(arch)) {
    for (int head_dim : kSweptHeadDims) {
      for (MaskKind mask : kMaskKinds) {
        for (const BackwardConfig& config :
             backward_configs(DType::bf16, head_dim, mask, false, false)) {
          add(config);
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
            default_backward_config(DType::bf16, head_dim, mask, false, deterministic, arch);
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
  return specs;
}

// Multi-scale attention's compile matrix: its forward and backward kernels (the attention
// tiles with multi-scale attention's step) for both masks: the defaults at head dims 64, 128 and
// 256 in bf16 and at 128 in fp16; with `all`, every config at 64 and 128 in bf16.
std::vector<detail::KernelSpec> multiscale_specs(const std::string& arch, SpecSet set) {
  struct Row {
    DType dtype;
    int head_dim;
  };
  constexpr Row kRows[] = {
      {DType::bf16, 64}, {DType::bf16, 128}, {DType::bf16, 256}, {DType::f16, 128}};
  std::vector<detail::KernelSpec> specs;
  std::unordered_set<std::string> listed;
  const auto add = [&](const detail::KernelSpec& spec) {
    if (listed.insert(spec.readable_name).second) specs.push_back(spec);
  };
  for (MultiScaleMask mask : {MultiScaleMask::decay, MultiScaleMask::tensor}) {
    for (const Row& row : kRows) {
      std::vector<ForwardConfig> forward = {
          default_multiscale_forward_config(row.dtype, row.head_dim, arch)};
      std::vector<BackwardConfig> backward = {
          default_multiscale_backward_config(row.dtype, row.head_dim, arch)};
      if (set == SpecSet::all && row.dtype == DType::bf16 && row.head_dim <= 128) {
        forward = multiscale_forward_configs(row.dtype, row.head_dim);
        backward = multiscale_backward_configs(row.dtype, row.head_dim);
      }
      for (const ForwardConfig& config : forward) add(multiscale_forward_spec(config, mask, arch));
      for (const BackwardConfig& config : backward) {
        for (const detail::KernelSpec& spec : multiscale_backward_specs(config, mask, arch)) {
          add(spec);
        }
      }
    }
  }
  return specs;
}

}  // namespace

const std::vector<OpInfo>& ops() {
  static const std::vector<OpInfo> registry = {
      {"softmax", "row-wise softmax (online softmax), fp16/bf16/fp32", softmax_specs},
      {"merge-states",
       "exact merge of partial attention states (O, natural-log LSE) over disjoint key sets, "
       "N-way and two-way in place; partials fp16/bf16/fp32",
       merge_states_specs},
      {"layer-norm",
       "layer norm and RMS norm, forward and backward (Welford statistics, fused bias and "
       "residual add, deterministic dgamma/dbeta), fp16/bf16/fp32",
       layer_norm_specs},
      {"multiscale",
       "multi-scale attention (retention): O = (S V) / max(rowsum(|S|), 1), S = scale·QKᵀ ∘ M "
       "with a per-head decay or a mask tensor; forward and deterministic backward, fp16/bf16",
       multiscale_specs},
      {"attention-forward",
       "FlashAttention-2 forward (causal, sliding window, GQA, softcap), fp16/bf16",
       attention_forward_specs},
      {"attention-backward",
       "FlashAttention-2 backward (dK, dV and atomic dQ in one kernel; or deterministic, dQ in "
       "its own), fp16/bf16",
       attention_backward_specs},
  };
  return registry;
}

const OpInfo& find_op(const std::string& name) {
  const auto& registry = ops();
  auto it = std::find_if(registry.begin(), registry.end(),
                         [&](const OpInfo& op) { return op.name == name; });
  if (it != registry.end()) return *it;
  std::string known;
  for (const OpInfo& op : registry) known += (known.empty() ? "" : ", ") + op.name;
  throw InvalidArgument("op", "unknown op '" + name + "'; known ops: " + known);
}

}  // namespace flashjit::kernels
