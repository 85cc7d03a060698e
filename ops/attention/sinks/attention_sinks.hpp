#pragma once
// Host side of learnable attention sinks (attention/sinks/sinks_kernel.cuh): Attention::sinks
// applied after any forward (one pass over its o and lse), and their gradient after a backward
// (Attention::sinks_grad). The facade calls these around the dense and the Sequences calls.
#include <cstdint>
#include <string>
#include <vector>

#include "flashjit/attention.hpp"
#include "flashjit/device_buffer.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// Throws InvalidArgument("attention.sinks" or "attention.sinks_grad") unless each present one
/// is fp32 [heads_q] (any stride); `backward`: sinks_grad needs sinks. Nothing when neither is.
void validate_sinks(const Attention& attention, bool backward);

/// The sinks' kernels: the pass after a forward, and the gradient's two (each chunk of rows'
/// partial sum, then each head's chunks in order).
enum class SinkKernel { apply, gradient, gradient_sum };

/// `kernel` for o of `dtype` (the ordered sum has no dtype) on `arch`.
detail::KernelSpec sinks_spec(SinkKernel kernel, DType dtype, const std::string& arch);
/// All five (the compile matrices list them).
std::vector<detail::KernelSpec> sinks_specs(const std::string& arch);

/// The lse a forward with sinks writes: the caller's, or where the caller skips lse a workspace
/// of `shape` (fp32, contiguous) that lives until the sinks are applied.
struct SinkLse {
  DeviceBuffer workspace;
  TensorView view;
};
SinkLse lse_for_sinks(detail::RuntimeBackend& backend, const Attention& attention,
                      const TensorView& lse, std::initializer_list<std::int64_t> shape,
                      Stream stream);

/// A caller's o (or dout) and lse as the sink kernels take them: dense [batch, seqlen, heads,
/// dim] and [batch, heads, seqlen] as they are, packed [total, heads, dim] and [heads, total] as
/// one sequence of `total` rows.
struct SinkTensors {
  TensorView rows;  // rank 4
  TensorView lse;   // rank 3
};
SinkTensors sink_tensors(const TensorView& rows, const TensorView& lse);

/// Rewrites a finished forward's o and lse into the sinks' (LSE' = log(e^LSE + e^s_h), O scaled
/// by e^(LSE − LSE')), queued on `stream`. Nothing without Attention::sinks.
void apply_sinks(detail::RuntimeBackend& backend, const Attention& attention, const TensorView& o,
                 const TensorView& lse, Stream stream);

/// Writes Attention::sinks_grad = −Σ e^(s_h − LSE') rowsum(dO ∘ O) per head from the forward's o
/// and lse (the sink included) and dout (like o), queued on `stream`: chunks of a head's rows
/// summed in parallel, then the chunks in order, so reruns are bit-identical. Nothing without
/// sinks_grad.
void sink_gradient(detail::RuntimeBackend& backend, const Attention& attention, const TensorView& o,
                   const TensorView& lse, const TensorView& dout, Stream stream);

}  // namespace flashjit::kernels
