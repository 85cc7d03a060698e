#pragma once
// How an op asks for the config of a call. kernels/ declares the question; the autotuner
// answers it (autotune::TuningState, by the runtime's tuning policy), and the public Runtime
// (api/) hands the one to the other, so kernels/ never depends on the autotuner.
#include <optional>

#include "flashjit/attention.hpp"
#include "flashjit/dtype.hpp"
#include "kernels/attention_backward.hpp"
#include "kernels/attention_forward.hpp"
#include "kernels/attention_inference_config.hpp"
#include "kernels/layer_norm.hpp"
#include "kernels/multiscale_attention.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// Chooses the config of each attention, multi-scale attention and layer norm call.
class ConfigChoice {
 public:
  virtual ~ConfigChoice() = default;
  /// The forward config for a validated, non-empty call of `attention` on `dtype` tensors: a
  /// valid config of the call's class that fits the device.
  virtual ForwardConfig forward_config(const Attention& attention, DType dtype) = 0;
  /// The backward config, as forward_config.
  virtual BackwardConfig backward_config(const Attention& attention, DType dtype) = 0;
  /// The config of a validated, non-empty decoding call (seqlen_q at most kMaxDecodeQueries,
  /// the split count left to the library) on a cache of `layout`: a config of decode_configs'
  /// space, or default_inference_config, that fits the device.
  virtual InferenceConfig decode_config(const Attention& attention, CacheLayout layout,
                                        DType dtype) = 0;
  /// The config of a validated layer norm call with at least one row, of `shape` on `dtype`
  /// tensors: a config of layer_norm_configs() for the dtype and norm whose bucket holds the
  /// row, or default_layer_norm_config.
  virtual LayerNormConfig layer_norm_config(const LayerNormShape& shape, DType dtype) = 0;
  /// The backward's config (its row kernel's), as layer_norm_config.
  virtual LayerNormBackwardConfig layer_norm_backward_config(const LayerNormShape& shape,
                                                             DType dtype) = 0;
  /// The config of a validated, non-empty multi-scale attention forward on `dtype` tensors: a
  /// config of multiscale_forward_configs() with the call's mask that fits the device.
  virtual MultiScaleForwardConfig multiscale_forward_config(const MultiScaleAttention& attention,
                                                            DType dtype) = 0;
  /// The backward's, as multiscale_forward_config (multiscale_backward_configs()).
  virtual MultiScaleBackwardConfig multiscale_backward_config(const MultiScaleAttention& attention,
                                                              DType dtype) = 0;
};

/// Runtime::forward on `backend`: validates the call (InvalidArgument naming the argument;
/// nothing launched), returns at once when it is empty, else launches the config `choice`
/// gives.
void run_attention_forward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                           const Attention& attention, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView& o, const TensorView& lse,
                           Stream stream);

/// run_attention_forward up to the launch: validates the call (InvalidArgument naming the
/// argument), and for a non-empty one returns what to launch on a device like `device`, with
/// the config `choice` gives; std::nullopt for an empty call.
std::optional<ForwardLaunch> plan_attention_forward(const DeviceInfo& device, ConfigChoice& choice,
                                                    const Attention& attention, const TensorView& q,
                                                    const TensorView& k, const TensorView& v,
                                                    const TensorView& o, const TensorView& lse,
                                                    Stream stream);

/// Launches a plan on `executor` (the tensor maps encoded in the executor's form first).
void launch_planned_forward(detail::Executor& executor, const ForwardLaunch& launch);

/// Runtime::backward on `backend`, as run_attention_forward.
void run_attention_backward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                            const Attention& attention, const TensorView& q, const TensorView& k,
                            const TensorView& v, const TensorView& o, const TensorView& lse,
                            const TensorView& dout, const TensorView& dq, const TensorView& dk,
                            const TensorView& dv, Stream stream);

}  // namespace flashjit::kernels
