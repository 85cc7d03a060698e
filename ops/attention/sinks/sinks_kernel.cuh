#pragma once
// Learnable attention sinks (gpt-oss's `sinks`): a logit s_h per query head that joins every
// row's softmax denominator and adds nothing to its output,
//   P_ij = e^(S_ij) / (Σ_j e^(S_ij) + e^(s_h)),   O_i = Σ_j P_ij V_j.
// That is the combiner of docs/design.md with one more partial state whose LSE is s_h and whose
// O is zero, so a finished forward's (O, LSE) becomes the sink's by
//   LSE' = log(e^LSE + e^(s_h)),   O' = e^(LSE − LSE') O,
// one pass after any forward path (after a split-KV merge: the sink counts once). The backward
// needs nothing more for q, k and v: with LSE' its P is the sink's, and D = rowsum(dO ∘ O') is
// what the delta kernel computes from O'. The sink's own gradient: ∂P_ij/∂s_h = −P_ij P_sink,i
// with P_sink,i = e^(s_h − LSE'_i), so
//   ∂L/∂s_h = −Σ_(b,i) P_sink,i Σ_j P_ij (dO_i · V_j) = −Σ_(b,i) e^(s_h − LSE'_i) D_i.
#include "attention/sinks/sinks_params.cuh"
#include "tile/memory.cuh"
#include "tile/numeric.cuh"
#include "tile/warp.cuh"

namespace flashjit {

/// One warp a (batch, row, head) row, head fastest; the lanes split the row's columns. Lane 0
/// alone reads and writes the LSE (the others get it by shuffle), so nothing reads it after
/// its rewrite.
template <typename T>
FJ_GLOBAL void __launch_bounds__(kSinkBlockThreads) attention_sinks_kernel(const SinkRowsParams p) {
  constexpr int kRowsPerBlock = kSinkBlockThreads / kWarpSize;
  const int lane = int(threadIdx.x) % kWarpSize;
  const index_t row = index_t(blockIdx.x) * kRowsPerBlock + int(threadIdx.x) / kWarpSize;
  if (row >= index_t(p.batch) * p.rows * p.heads) return;  // whole warps leave together
  const int head = int(row % p.heads);
  const int position = int(row / p.heads % p.rows), batch = int(row / p.heads / p.rows);
  float* lse_at = p.lse.rows<float>(batch, head, position);
  const float lse2 = shuffle_from(lane == 0 ? load_global(lse_at, 0) : 0.0f, 0) * kLog2e;
  const float sink2 = load_global(p.sinks, head * p.sink_stride) * kLog2e;
  // A row that saw no key (LSE = -inf) keeps O = 0 and gets LSE' = s_h.
  const bool seen = lse2 != negative_infinity();
  const float top = seen ? max_float(lse2, sink2) : sink2;
  const float merged2 =
      seen ? top + log2_approx(exp2_approx(lse2 - top) + exp2_approx(sink2 - top)) : sink2;
  const float scale = seen ? exp2_approx(lse2 - merged2) : 0.0f;
  T* o_row = p.o.rows<T>(batch, head, position);
  for (int column = lane; column < p.head_dim; column += kWarpSize) {
    store_global(o_row, column, load_global(o_row, column) * scale);
  }
  if (lane == 0) store_global(lse_at, 0, merged2 * kLn2);
}

/// One warp a chunk of a head's (batch, row) rows (grid: chunks, heads), walking them in
/// order: D_i from the lanes' columns summed across the warp, weighted by e^(s_h − LSE'_i),
/// into the chunk's partial sum. Nothing depends on scheduling, so reruns give the same bits.
template <typename T>
FJ_GLOBAL void __launch_bounds__(kWarpSize)
    attention_sink_gradient_kernel(const SinkGradientParams p) {
  const int chunk = int(blockIdx.x), head = int(blockIdx.y), lane = int(threadIdx.x);
  const float sink2 = load_global(p.sinks, head * p.sink_stride) * kLog2e;
  const index_t first = index_t(chunk) * kSinkRowsPerChunk;
  const index_t end = first + kSinkRowsPerChunk < index_t(p.batch) * p.rows
                          ? first + kSinkRowsPerChunk
                          : index_t(p.batch) * p.rows;
  float total = 0.0f;
  for (index_t row = first; row < end; ++row) {
    const int batch = int(row / p.rows), position = int(row % p.rows);
    const T* o_row = p.o.rows<T>(batch, head, position);
    const T* dout_row = p.dout.rows<T>(batch, head, position);
    float dot = 0.0f;
    for (int column = lane; column < p.head_dim; column += kWarpSize) {
      dot = fma_rn(load_global(dout_row, column), load_global(o_row, column), dot);
    }
    dot = warp_allreduce(dot, [](float a, float b) { return a + b; });  // D_i
    const float lse2 = load_global(p.lse.rows<float>(batch, head, position), 0) * kLog2e;
    total = fma_rn(exp2_approx(sink2 - lse2), dot, total);
  }
  if (lane == 0) store_global(p.partials, index_t(head) * p.chunks + chunk, total);
}

/// One warp a head (grid: heads): its chunks' partial sums, lane l taking chunks l, l + 32, ...
/// in order, then the lanes' in the shuffle's fixed order; the gradient is minus the sum.
FJ_GLOBAL void __launch_bounds__(kWarpSize)
    attention_sink_gradient_sum_kernel(const SinkGradientParams p) {
  const int head = int(blockIdx.x), lane = int(threadIdx.x);
  float total = 0.0f;
  for (int chunk = lane; chunk < p.chunks; chunk += kWarpSize) {
    total += load_global(p.partials, index_t(head) * p.chunks + chunk);
  }
  total = warp_allreduce(total, [](float a, float b) { return a + b; });
  if (lane == 0) store_global(p.sinks_grad, head * p.grad_stride, -total);
}

}  // namespace flashjit
