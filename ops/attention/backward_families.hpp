#pragma once
// What each backward family gives the op's front (attention_backward.cpp): its configs, its
// validity, its default and its kernels by name, each a kernel function instantiated with its
// traits' arguments under their parameters' names (ops/common/template_arguments.hpp).
// FlashAttention-2's (mma.sync: dK/dV, dQ and per-row kernels) are in fa2/fa2_backward.cpp, the
// Hopper backward's (and its TMA maps) in hopper/hopper_backward.cpp. Internal to ops/.
#include <optional>
#include <string>
#include <vector>

#include "attention/attention_backward.hpp"
#include "attention/modifiers/score_modifiers.hpp"
#include "common/template_arguments.hpp"
#include "emulator/ptx_api.hpp"
#include "flashjit/tensor.hpp"

namespace flashjit::kernels {

/// One backward kernel (its traits, or for the per-row kernels the function's own arguments).
using BackwardKernel = KernelTemplate;

/// The mma.sync dK/dV kernel of `config` (BackwardKeyTraits, attention/fa2/backward_traits.cuh).
BackwardKernel fa2_dkdv_kernel(const BackwardConfig& config, const ScoreModifiers& modifiers);
/// The mma.sync dQ kernel of a deterministic `config` (BackwardQueryTraits).
BackwardKernel fa2_dq_kernel(const BackwardConfig& config, const ScoreModifiers& modifiers);
/// A per-row kernel, "delta_kernel" or "dq_convert_kernel", templated on the element type, the
/// varlen flag and (dQ-convert) whether dQ's sums are in the Hopper backward's permuted layout.
BackwardKernel fa2_row_kernel(const std::string& kernel, DType dtype, bool varlen, bool permuted);
/// Whether FlashAttention-2's kernels take `config` (its dK/dV tile, and its dQ tile when
/// deterministic; the default query tile otherwise).
bool fa2_backward_config_valid(const BackwardConfig& config);
/// Every valid mma.sync config, dK/dV tiles by Br, Bc, warps and stages ascending, each with
/// every dQ tile (Br, Bc, warps ascending) when deterministic.
std::vector<BackwardConfig> fa2_backward_configs(DType dtype, int head_dim, MaskKind mask,
                                                 bool softcap, bool deterministic);
/// The mma.sync default: each kernel's first preferred tile that is valid and fits `limit`
/// bytes of shared memory; nullopt when none does.
std::optional<BackwardConfig> fa2_backward_default(DType dtype, int head_dim, MaskKind mask,
                                                   bool softcap, bool deterministic, int limit);

/// Whether the Hopper backward takes `config` (BackwardConfig::tma).
bool tma_backward_config_valid(const BackwardConfig& config);
/// Every valid Hopper backward config (Bc 64, 64 shared by two warpgroups, 128; then stages).
std::vector<BackwardConfig> tma_backward_configs(DType dtype, int head_dim, MaskKind mask,
                                                 bool softcap, bool deterministic);
/// The Hopper backward's default on sm_90a (from head dim 64; `modified`: with score or mask
/// modifiers), or nullopt where it takes no such head dim or no config fits `limit` bytes.
std::optional<BackwardConfig> tma_backward_default(DType dtype, int head_dim, MaskKind mask,
                                                   bool softcap, bool deterministic, bool modified,
                                                   int limit);

/// The Hopper backward's tensor maps for a call, built once: checked, then encoded at launch.
struct TmaBackwardMaps {
  std::vector<emulator::TensorMap> maps;  ///< Q, K, V, dO with Bc = the config's block_n
  std::string problem;  ///< why the kernel cannot run the call on `arch`, "" when it can
};
/// The maps of `config` (a TMA one) for the call, and whether the kernel can run it: a target
/// other than sm_90a or tensors TMA cannot read are named in `problem`.
TmaBackwardMaps tma_backward_maps(const std::string& arch, const TensorView& q, const TensorView& k,
                                  const TensorView& v, const TensorView& dout,
                                  const BackwardConfig& config);

/// The Hopper backward's dK/dV kernel of a TMA `config` (TmaBackwardTraits,
/// attention/hopper/tma_backward_traits.cuh).
BackwardKernel tma_dkdv_kernel(const BackwardConfig& config, const ScoreModifiers& modifiers);

}  // namespace flashjit::kernels
