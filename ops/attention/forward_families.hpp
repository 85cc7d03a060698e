#pragma once
// What each forward family gives the op's front (attention_forward.cpp): its configs, its
// default, its validity beyond the shared rules, and its kernel by name (the template file, the
// kernel function and its traits type's arguments by name). Each family writes its own in its
// folder: fa2/fa2_forward.cpp, hopper/hopper_forward.cpp, wide/wide_forward.cpp,
// decode/decode_forward.cpp, fp8/fp8_forward.cpp. Internal to
// ops/.
#include <optional>
#include <string>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/modifiers/score_modifiers.hpp"
#include "common/template_arguments.hpp"

namespace flashjit::kernels {

/// One forward kernel: `function<traits>` in `header`.
using ForwardKernel = KernelTemplate;

/// FlashAttention-2's valid configs for (dtype, head_dim, mask, softcap): by Br, then Bc, warps,
/// stages and Q in registers, ascending.
std::vector<ForwardConfig> fa2_forward_configs(DType dtype, int head_dim, MaskKind mask,
                                               bool softcap);
/// The Hopper paths' valid configs (sm_90a only: see runs_on): the wgmma forward's, then the
/// TMA forward's schedules, stages, P's place, persistence and clusters.
std::vector<ForwardConfig> hopper_forward_configs(DType dtype, int head_dim, MaskKind mask,
                                                  bool softcap);
/// The TMA path's default tile and schedule for (dtype, head_dim, mask, softcap), or nullopt
/// where the head dim is outside the path or the tile needs more than `limit` bytes of shared
/// memory.
std::optional<ForwardConfig> tma_default_config(DType dtype, int head_dim, MaskKind mask,
                                                bool softcap, int limit);
/// The TMA forward's part of a launch whose grid is one CTA per (query block, head, batch):
/// its tensor maps, and the grid as the kernel's tiles, one CTA each (in clusters, whole
/// clusters of them) or, persistent, at most one CTA per SM of `device`.
void add_tma_forward_launch(ForwardLaunch& launch, const ForwardConfig& config,
                            const Attention& attention, const DeviceInfo& device);
/// The wide path's part of ForwardConfig::valid.
bool wide_forward_config_valid(const ForwardConfig& config);
/// The decode kernel's part of ForwardConfig::valid and its shared memory
/// (decode/decode_forward.cpp).
bool decode_forward_config_valid(const ForwardConfig& config);
int decode_forward_shared_bytes(const ForwardConfig& config);

/// The fp8 forward's part of ForwardConfig::valid and its shared memory, its valid configs for
/// (head_dim, mask, softcap), its default on `arch` (ptxas-checked tiles per head dim; the TMA
/// form on sm_90a unless `allow_tma` is false; throws InvalidArgument("dtype") before sm_89,
/// "head_dim" outside its head dims) and its kernel: attention/fp8/fp8_forward_kernel.cuh or
/// attention/fp8/fp8_tma_kernel.cuh (fp8/fp8_forward.cpp).
bool fp8_forward_config_valid(const ForwardConfig& config);
int fp8_forward_shared_bytes(const ForwardConfig& config);
/// The TMA form's part of a launch: its tensor maps (fp8_forward_tma_maps) and its grid, one
/// CTA a tile of (query block, head, batch) along x.
void add_fp8_tma_forward_launch(ForwardLaunch& launch, const ForwardConfig& config,
                                const Attention& attention);
std::vector<ForwardConfig> fp8_forward_configs(int head_dim, MaskKind mask, bool softcap);
ForwardConfig fp8_forward_config(int head_dim, MaskKind mask, bool softcap, const std::string& arch,
                                 bool allow_tma);
ForwardKernel fp8_forward_kernel(const ForwardConfig& config);
/// The forward kernel of `config`'s path (attention_forward.cpp).
ForwardKernel forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers);

/// The SequenceLayout of an inference config (attention/parts/sequence_layout.cuh).
TemplateArguments sequence_layout_arguments(const ForwardConfig& config);

/// FlashAttention-2's forward (mma.sync): attention/fa2/forward_kernel.cuh.
ForwardKernel fa2_forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers);
/// The warp-specialized TMA forward, clustered or not: attention/hopper/tma_forward_kernel.cuh.
ForwardKernel tma_forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers);
/// The first wgmma forward: attention/hopper/wgmma_forward_kernel.cuh.
ForwardKernel wgmma_forward_kernel(const ForwardConfig& config);
/// The wide-head forward: attention/wide/wide_forward_kernel.cuh.
ForwardKernel wide_forward_kernel(const ForwardConfig& config);
/// The decode kernel: attention/decode/decode_kernel.cuh.
ForwardKernel decode_forward_kernel(const ForwardConfig& config, const ScoreModifiers& modifiers);

/// The flashjit::MaskKind enumerator of `mask` as a template argument.
std::string mask_argument(MaskKind mask);

/// The default of the traits' Modifiers_ parameter, and the traits' Layout_'s.
inline constexpr const char* kNoModifiers = "flashjit::NoModifiers";
inline constexpr const char* kDenseLayout = "flashjit::DenseLayout";
/// `modifiers`' struct as the traits' Modifiers_ argument (kNoModifiers without any).
std::string modifiers_argument(const ScoreModifiers& modifiers);
/// `config`'s sequence layout as the traits' Layout_ argument: its SequenceLayout, or
/// kDenseLayout without an inference layout.
std::string layout_argument(const ForwardConfig& config);

}  // namespace flashjit::kernels
