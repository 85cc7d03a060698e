#pragma once
// The forward kernel of each family (attention_forward.cpp's forward_spec picks one by the
// config's path): the template file, the kernel function and its traits type's arguments by
// name. Each family writes its own in its folder (fa2/, hopper/, wide/). Internal to ops/.
#include <string>

#include "attention/attention_forward.hpp"
#include "attention/modifiers/score_modifiers.hpp"
#include "common/template_arguments.hpp"

namespace flashjit::kernels {

/// One forward kernel: `function<traits>` in `header`.
struct ForwardKernel {
  std::string header;    ///< "attention/fa2/forward_kernel.cuh", as NVRTC includes it
  std::string function;  ///< "flashjit::attention_forward_kernel"
  TemplateArguments traits;

  std::string name_expression() const { return function + "<" + traits.expression() + ">"; }
};

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

/// The flashjit::MaskKind enumerator of `mask` as a template argument.
std::string mask_argument(MaskKind mask);

}  // namespace flashjit::kernels
