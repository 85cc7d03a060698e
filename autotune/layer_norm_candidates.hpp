#pragma once
// The layer norm ops' side of the candidates (candidates.hpp): their space, default, names,
// keys, bytes and static pruning. A layer norm config is a row-length bucket, threads per row
// and a vector width (templates/layer_norm/layer_norm_space.cuh); the call's dtype and norm
// pick the space, the row length prunes it.
#include <string>
#include <vector>

#include "autotune/candidates.hpp"

namespace flashjit::autotune {

/// Whether `op` is layernorm or layernorm-backward.
bool is_layer_norm(TunedOp op);

/// Whether `config` is a layer norm op's (LayerNormConfig or LayerNormBackwardConfig).
bool is_layer_norm_config(const TunedConfig& config);

/// "c4096.t128.v4": the bucket ("cany" for the unbounded one), threads per row, vector width.
std::string layer_norm_config_name(const kernels::LayerNormConfig& config);

/// The configs of layer_norm_configs() of the problem's dtype and norm, every bucket, as the
/// op's config type (the backward's wraps each as its row kernel's).
std::vector<TunedConfig> layer_norm_space(const TuningProblem& problem);

/// default_layer_norm_config for the problem's row, as the op's config type.
TunedConfig layer_norm_default(const TuningProblem& problem);

/// The row kernel's config of a layer norm op's config.
const kernels::LayerNormConfig& row_config(const TunedConfig& config);

/// Fills the layer norm fields of `key`: columns, rows and the norm with its fused adds
/// ("ln", "rms", then ".bias" and ".residual" for the forward, ".dbias" for the backward).
void fill_layer_norm_key(const TuningProblem& problem, TuningKey& key);

/// The bytes a call reads and writes (see problem_bytes).
double layer_norm_bytes(const TuningProblem& problem);

/// Prunes the bounded buckets larger than the smallest bucket that holds the row: they do the
/// same work with more register slots a thread leaves idle. The unbounded bucket (a second
/// read of the row instead of registers) and the default stay.
void prune_layer_norm_buckets(std::vector<Candidate>& candidates, const TuningProblem& problem);

}  // namespace flashjit::autotune
