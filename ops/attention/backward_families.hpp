#pragma once
// What each backward family gives the op's front (attention_backward.cpp): its kernels by name,
// each a kernel function instantiated with its traits' arguments under their parameters' names
// (ops/common/template_arguments.hpp). FlashAttention-2's (mma.sync) dK/dV, dQ and per-row
// kernels are in fa2/fa2_backward.cpp, the Hopper backward's in hopper/hopper_backward.cpp.
// Internal to ops/.
#include <string>

#include "attention/attention_backward.hpp"
#include "attention/modifiers/score_modifiers.hpp"
#include "common/template_arguments.hpp"

namespace flashjit::kernels {

/// One backward kernel (its traits, or for the per-row kernels the function's own arguments).
using BackwardKernel = KernelTemplate;

/// The mma.sync dK/dV kernel of `config` (BackwardKeyTraits, attention/fa2/backward_traits.cuh).
BackwardKernel fa2_dkdv_kernel(const BackwardConfig& config, const ScoreModifiers& modifiers);
/// The mma.sync dQ kernel of a deterministic `config` (BackwardQueryTraits).
BackwardKernel fa2_dq_kernel(const BackwardConfig& config, const ScoreModifiers& modifiers);
/// A per-row kernel, "delta_kernel" or "dq_convert_kernel", templated on the element type, the
/// varlen flag and (dQ-convert) whether dQ's sums are in the Hopper backward's permuted layout.
BackwardKernel fa2_row_kernel(const std::string& kernel, DType dtype, bool varlen,
                              bool permuted);
/// The Hopper backward's dK/dV kernel of a TMA `config` (TmaBackwardTraits,
/// attention/hopper/tma_backward_traits.cuh).
BackwardKernel tma_dkdv_kernel(const BackwardConfig& config, const ScoreModifiers& modifiers);

}  // namespace flashjit::kernels
