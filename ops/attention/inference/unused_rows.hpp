#pragma once
// Host side of the unused rows' fill (attention/inference/unused_rows_kernel.cuh): after a call
// with Sequences::seqused_q (or, in the backward, seqlens_k), the rows past each sequence's used
// count get o's and the gradients' 0 and lse's -inf.
#include <string>
#include <vector>

#include "flashjit/attention.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// The fill kernel for elements of `dtype` (fp16, bf16, fp32) on `arch`.
detail::KernelSpec unused_rows_spec(DType dtype, const std::string& arch);
/// The three of them (the compile matrix lists them).
std::vector<detail::KernelSpec> unused_rows_specs(const std::string& arch);

/// Which of a tensor's rows a sequence owns: packed by `cu_seqlens` ([batch + 1]; absent: dense,
/// `seqlen` rows each), the first `used[b]` of sequence b's used.
struct SequenceRows {
  TensorView cu_seqlens;
  TensorView used;
  std::int64_t batch = 0;
  std::int64_t seqlen = 0;
};

/// Writes `value` into the rows of `view` past each sequence's used count, queued on `stream`:
/// `view` is a kernels' rank-4 view [batch, rows, heads, width] (batch 1 with batch stride 0
/// when packed), or with `lse` a rank-3 one [batch, heads, rows]. Nothing when `rows.used` is
/// absent or the batch is empty.
void fill_unused_rows(detail::RuntimeBackend& backend, const TensorView& view, bool lse,
                      const SequenceRows& rows, float value, Stream stream);

}  // namespace flashjit::kernels
