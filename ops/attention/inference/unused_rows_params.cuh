#pragma once
// The unused rows' fill (attention/inference/unused_rows_kernel.cuh): its arguments, shared by the
// host, which fills them, and the kernel, which takes them by value.
#include "attention/parts/head_tensor.cuh"

namespace flashjit {

/// Threads a block of the fill kernel.
constexpr int kUnusedRowsThreads = 128;

/// Sequence b's rows past its used count `used[b]` of the strided [batch, rows, heads, width]
/// tensor `rows` (o, dq, dk, dv; lse as rows of width 1, one element apart) get `value`: its
/// rows are cu_seqlens[b] to cu_seqlens[b + 1] of a packed tensor (batch stride 0), else the
/// seqlen rows of batch b.
struct UnusedRowsParams {
  HeadTensor rows;
  const int* cu_seqlens;  // [batch + 1]; nullptr: dense, seqlen rows a sequence
  const int* used;        // [batch]
  int seqlen;
  int heads;
  int width;
  float value;
};

}  // namespace flashjit
