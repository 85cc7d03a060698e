#pragma once
// The attention op's dense calls as the facade makes them (Runtime::forward, Runtime::backward):
// each describes its call to the autotuner's ConfigChoice (autotune/tuning_problem.hpp) as a
// TuningProblem of the op's (attention_tuning.hpp), which the autotuner answers by the
// runtime's tuning policy; the public Runtime (api/) hands one to the op.
#include <optional>

#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "autotune/tuning_problem.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/dtype.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

using autotune::ConfigChoice;

/// Runtime::forward on `backend`: validates the call (InvalidArgument naming the argument;
/// nothing launched), returns at once when it is empty, else launches the config `choice`
/// gives.
void run_attention_forward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                           const Attention& attention, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView& o, const TensorView& lse,
                           Stream stream);

/// The config a forward of `attention` launches for the config chosen for it: the same, but
/// the unclustered twin of a clustered one for an odd number of query blocks.
ForwardConfig launched_forward_config(const Attention& attention, ForwardConfig config);

/// run_attention_forward up to the launch: validates the call (InvalidArgument naming the
/// argument), and for a non-empty one returns what to launch on a device like `device`, with
/// the config `choice` gives; std::nullopt for an empty call.
std::optional<ForwardLaunch> plan_attention_forward(const DeviceInfo& device, ConfigChoice& choice,
                                                    const Attention& attention, const TensorView& q,
                                                    const TensorView& k, const TensorView& v,
                                                    const TensorView& o, const TensorView& lse,
                                                    Stream stream);

/// Launches a plan on `backend` (the tensor maps encoded in the executor's form first, a tile
/// counter of the stream's given to a kernel that takes its tiles from one). Taken by value:
/// callers hand over their plan, which the counter is added to without a copy.
void launch_planned_forward(detail::RuntimeBackend& backend, ForwardLaunch launch);

/// Runtime::backward on `backend`, as run_attention_forward.
void run_attention_backward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                            const Attention& attention, const TensorView& q, const TensorView& k,
                            const TensorView& v, const TensorView& o, const TensorView& lse,
                            const TensorView& dout, const TensorView& dq, const TensorView& dk,
                            const TensorView& dv, Stream stream);

}  // namespace flashjit::kernels
