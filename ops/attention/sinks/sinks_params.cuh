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

/// (batch, row) rows of one head whose gradient terms one warp sums (a chunk): enough chunks
/// to fill a GPU at real sizes, few enough that their ordered sum is short.
constexpr int kSinkRowsPerChunk = 64;

/// Arguments of attention_sink_gradient_kernel (each chunk's partial sum) and of
/// attention_sink_gradient_sum_kernel (each head's chunks summed in order): the sinks' gradient
/// from the forward's o and lse (with the sink) and the output's gradient.
struct SinkGradientParams {
  HeadTensor o;     // as the forward wrote it
  HeadTensor lse;   // as the forward wrote it, the sink included
  HeadTensor dout;  // like o
  const float* sinks;
  index_t sink_stride;
  float* sinks_grad;  // [heads], written
  index_t grad_stride;
  float* partials;  // [heads, chunks]: written by the first kernel, read by the second
  int chunks;       // ceil(batch · rows / kSinkRowsPerChunk)
  int batch, rows, heads, head_dim;
};

}  // namespace flashjit
