#pragma once
// Host side of multi-scale attention (retention; ops/multiscale/): its configs are the
// attention kernels' tiles (the forward's mma.sync space, the deterministic backward's dK/dV
// and dQ tiles) with multi-scale attention's element-wise step, so the spaces, defaults and
// validity are those of attention_forward.hpp and attention_backward.hpp. Validation, specs and
// launches.
#include <string>
#include <vector>

#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "flashjit/multiscale_attention.hpp"
#include "multiscale/multiscale_params.cuh"
#include "runtime/runtime_backend.hpp"

namespace flashjit::autotune {
class ConfigChoice;
}  // namespace flashjit::autotune

namespace flashjit::kernels {

using autotune::ConfigChoice;  // autotune/tuning_problem.hpp

/// A multi-scale forward kernel: an attention forward tile of the mma.sync path, compiled with
/// multi-scale attention's step for `mask`.
struct MultiScaleForwardConfig {
  ForwardConfig tile;
  MultiScaleMask mask = MultiScaleMask::decay;
  bool operator==(const MultiScaleForwardConfig&) const = default;
  int shared_bytes() const { return tile.shared_bytes(); }
};

/// The multi-scale backward's kernels: a deterministic attention backward's dK/dV and dQ tiles,
/// compiled with multi-scale attention's step for `mask`.
struct MultiScaleBackwardConfig {
  BackwardConfig tiles;
  MultiScaleMask mask = MultiScaleMask::decay;
  bool operator==(const MultiScaleBackwardConfig&) const = default;
  int shared_bytes() const { return tiles.shared_bytes(); }
};

/// The device twin of `mask`.
MultiScaleMaskKind multiscale_mask_kind(MultiScaleMask mask);

/// The attention problem whose tile configs and sizes a multi-scale call shares: no mask kind,
/// no softcap, the multi-scale scale (1/sqrt(head_dim) for 0).
Attention multiscale_as_attention(const MultiScaleAttention& attention);

/// Every forward config of a multi-scale call's class: the mma.sync path's, in its fixed order.
std::vector<ForwardConfig> multiscale_forward_configs(DType dtype, int head_dim);
/// Every backward config (deterministic: a dK/dV tile and a dQ tile), in a fixed order.
std::vector<BackwardConfig> multiscale_backward_configs(DType dtype, int head_dim);

/// The heuristic configs on `arch`: the mma.sync forward's default for 64-row query blocks, and
/// the deterministic backward's, for (dtype, head_dim) without a mask kind.
ForwardConfig default_multiscale_forward_config(DType dtype, int head_dim, const std::string& arch);
BackwardConfig default_multiscale_backward_config(DType dtype, int head_dim,
                                                  const std::string& arch);

/// The forward kernel of `config` with `mask` on `arch`: op "multiscale", readable
/// name like "multiscale_forward.hdim64.bf16.decay.br64.bc64.w4.s2".
detail::KernelSpec multiscale_forward_spec(const ForwardConfig& config, MultiScaleMask mask,
                                           const std::string& arch);

/// The backward's kernels in launch order: δ = rowsum(dO ∘ O) (the attention backward's delta
/// kernel), dK/dV, dQ (and dM for a mask tensor).
std::vector<detail::KernelSpec> multiscale_backward_specs(const BackwardConfig& config,
                                                          MultiScaleMask mask,
                                                          const std::string& arch);

/// Checks a forward call's arguments (see Runtime::multiscale_forward); throws InvalidArgument
/// naming the first bad one ("attention.head_dim", "mask.shape", "rowsum.dtype", ...).
void validate_multiscale_forward(const MultiScaleAttention& attention, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& mask,
                                 const TensorView& o, const TensorView& rowsum);

/// Checks a backward call's arguments (see Runtime::multiscale_backward), as the forward's and
/// the gradients': shapes like their inputs, no memory shared with an input or each other.
void validate_multiscale_backward(const MultiScaleAttention& attention, const TensorView& q,
                                  const TensorView& k, const TensorView& v, const TensorView& mask,
                                  const TensorView& o, const TensorView& rowsum,
                                  const TensorView& dout, const TensorView& dq,
                                  const TensorView& dk, const TensorView& dv,
                                  const TensorView& dmask);

/// Runtime::multiscale_forward on `backend` with an explicit config (tests; `run_...` takes
/// the default): validates, then launches. Nothing is launched on bad input.
void multiscale_forward(detail::RuntimeBackend& backend, const MultiScaleAttention& attention,
                        const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& mask, const TensorView& o, const TensorView& rowsum,
                        const ForwardConfig& config, Stream stream);

/// Runtime::multiscale_backward on `backend` with an explicit (deterministic) config.
void multiscale_backward(detail::RuntimeBackend& backend, const MultiScaleAttention& attention,
                         const TensorView& q, const TensorView& k, const TensorView& v,
                         const TensorView& mask, const TensorView& o, const TensorView& rowsum,
                         const TensorView& dout, const TensorView& dq, const TensorView& dk,
                         const TensorView& dv, const TensorView& dmask,
                         const BackwardConfig& config, Stream stream);

/// Runtime::multiscale_forward and multiscale_backward on `backend`: validate, then launch the
/// config `choice` gives (the tuning policy's).
void run_multiscale_forward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                            const MultiScaleAttention& attention, const TensorView& q,
                            const TensorView& k, const TensorView& v, const TensorView& mask,
                            const TensorView& o, const TensorView& rowsum, Stream stream);
void run_multiscale_backward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                             const MultiScaleAttention& attention, const TensorView& q,
                             const TensorView& k, const TensorView& v, const TensorView& mask,
                             const TensorView& o, const TensorView& rowsum, const TensorView& dout,
                             const TensorView& dq, const TensorView& dk, const TensorView& dv,
                             const TensorView& dmask, Stream stream);

}  // namespace flashjit::kernels
