#pragma once
// The sink kernels' run-time arguments (attention/sinks/sinks_kernel.cuh), filled by the host
// and taken by value.
#include "attention/parts/head_tensor.cuh"

namespace flashjit {

/// Threads of a sinks block: a warp a (batch, row, head) row.
constexpr int kSinkBlockThreads = 128;

/// Arguments of attention_sinks_kernel: a finished forward's o and lse, rewritten in place.
struct SinkRowsParams {
  HeadTensor o;        // [batch, rows, heads, head_dim], read and written
  HeadTensor lse;      // [batch, rows, heads] as rows of width 1 (fp32), read and written
  const float* sinks;  // [heads] logits
  index_t sink_stride;
  int batch, rows, heads, head_dim;
};

/// Arguments of attention_sink_gradient_kernel: the sinks' gradient from the forward's o and
/// lse (with the sink) and the output's gradient.
struct SinkGradientParams {
  HeadTensor o;     // as the forward wrote it
  HeadTensor lse;   // as the forward wrote it, the sink included
  HeadTensor dout;  // like o
  const float* sinks;
  index_t sink_stride;
  float* sinks_grad;  // [heads], written
  index_t grad_stride;
  int batch, rows, heads, head_dim;
};

}  // namespace flashjit
