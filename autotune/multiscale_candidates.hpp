#pragma once
// The multi-scale attention ops' side of the candidates (candidates.hpp): their space, default,
// specs and tiles. A multi-scale config is an attention tile (the mma.sync forward's, or the
// deterministic backward's dK/dV and dQ tiles) with the call's mask kind; its names are the
// attention tiles' names, the mask being part of the key.
#include <vector>

#include "autotune/candidates.hpp"

namespace flashjit::autotune {

/// Whether `op` is multiscale-forward or multiscale-backward.
bool is_multiscale(TunedOp op);

/// Whether `config` is a multi-scale op's (MultiScaleForwardConfig or MultiScaleBackwardConfig).
bool is_multiscale_config(const TunedConfig& config);

/// The problem of a multi-scale call of `attention` on `dtype` tensors for `op`.
TuningProblem multiscale_problem(TunedOp op, const MultiScaleAttention& attention, DType dtype);

/// The problem's call as Runtime::multiscale_forward sees it (the attention sizes, the mask).
MultiScaleAttention multiscale_attention(const TuningProblem& problem);

/// Every config of the op's space for the problem's dtype, head dim and mask: the forward's
/// mma.sync tiles, or every (dK/dV, dQ) tile pair of the backward (of which the tuner times
/// each tile beside the default's other, then the fastest pair, as for the attention
/// backward's deterministic mode).
std::vector<TunedConfig> multiscale_space(const TuningProblem& problem);

/// The heuristic default on `arch`.
TunedConfig multiscale_default(const TuningProblem& problem, const std::string& arch);

/// The kernels a call of a multi-scale config launches on `arch`, in launch order; empty for
/// any other config.
std::vector<detail::KernelSpec> multiscale_specs(const TunedConfig& config,
                                                 const std::string& arch);

/// The attention config a multi-scale config's tiles are (its name, Br and Bc), or `config`
/// itself for any other.
TunedConfig attention_tiles(const TunedConfig& config);

}  // namespace flashjit::autotune
