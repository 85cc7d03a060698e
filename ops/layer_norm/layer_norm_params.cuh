#pragma once
// The layer_norm kernels' run-time arguments, structs shared by the host (which fills them) and
// the kernels (which take them by value). Every [rows, cols] tensor has unit column stride and
// its own row stride; [cols] vectors are contiguous; statistics are fp32 [rows] with any stride
// (a column of a wider tensor, say). Element types
// are the config's (one dtype for every tensor but the statistics and the workspace).
#include "tile/platform.cuh"

namespace flashjit {

/// A [rows, cols] tensor with unit column stride; data nullptr: absent.
struct RowMajor {
  void* data;
  index_t row_stride;

  /// Row `row`'s cols values.
  template <typename T>
  FJ_DEVICE T* row(index_t row_index) const {
    return static_cast<T*>(data) + row_index * row_stride;
  }
  FJ_DEVICE bool present() const { return data != nullptr; }
};

/// A [rows] fp32 statistic (μ or rstd), its rows `stride` apart; data nullptr: absent.
template <typename T>
struct RowStatistic {
  T* data;
  index_t stride;

  /// Row `row`'s value.
  FJ_DEVICE T* at(index_t row) const { return data + row * stride; }
  FJ_DEVICE bool present() const { return data != nullptr; }
};

/// Arguments of layer_norm_kernel: y = (x − μ)·rstd·γ + β per row, x = input (+ bias)
/// (+ residual), with μ = 0 and no β for RMS norm.
struct LayerNormParams {
  RowMajor input;            // (rows, cols)
  RowMajor residual;         // (rows, cols); absent: no residual
  const void* bias;          // (cols,); nullptr: no bias
  RowMajor sum;              // (rows, cols), written: x, the next block's residual; absent: skipped
  const void* gamma;         // (cols,)
  const void* beta;          // (cols,); nullptr for RMS norm
  RowMajor y;                // (rows, cols), written
  RowStatistic<float> mean;  // (rows,), written; absent: skipped (RMS norm writes none)
  RowStatistic<float> rstd;  // (rows,), written: 1/√(σ² + ε) or 1/√(mean(x²) + ε); absent: skipped
  index_t rows;
  int cols;
  float epsilon;
  int stash;  // the unbounded config's: layer_norm_space::Stash (what shared memory holds)

  /// Whether x is a fused sum (input + bias + residual) rather than the input itself.
  FJ_DEVICE bool fused() const { return bias != nullptr || residual.present(); }
};

/// Arguments of layer_norm_backward_kernel and layer_norm_param_grad_kernel. Block b sums its
/// rows (a contiguous range, in order) into its partial dγ, dβ and dbias, written once to the
/// workspace; the second kernel adds the blocks' partials in block order. So the same inputs
/// on the same grid give the same bits on every run.
struct LayerNormBackwardParams {
  RowMajor x;         // (rows, cols): the normalized input (the forward's sum when fused)
  const void* gamma;  // (cols,)
  RowStatistic<const float> mean;  // (rows,); absent for RMS norm
  RowStatistic<const float> rstd;  // (rows,)
  RowMajor dy;                     // (rows, cols)
  RowMajor dx;                     // (rows, cols), written: dL/dx (= dL/dinput = dL/dresidual)
  void* dgamma;                    // (cols,), written
  void* dbeta;                     // (cols,), written; nullptr: skipped (RMS norm)
  void* dbias;                     // (cols,), written: column sums of dx; nullptr: skipped
  float* workspace;                // (planes, blocks, cols): the blocks' partial dγ, dβ, dbias
  index_t rows;
  int cols;
  int blocks;  // the row kernel's block groups (blocks, or clusters): one partial each
  int stash;   // the unbounded config's: layer_norm_space::BackwardStash bits

  /// The partial sums the call writes: dγ, then dβ and dbias when asked for.
  FJ_DEVICE int planes() const { return 1 + (dbeta != nullptr) + (dbias != nullptr); }
  /// The plane of sum `which` (0 dγ, 1 dβ, 2 dbias) among those the call writes.
  FJ_DEVICE int plane_of(int which) const { return which < 2 ? which : (dbeta != nullptr) + 1; }
  /// Block `block`'s partial of sum `which`.
  FJ_DEVICE float* partial(int which, int block) const {
    return workspace + (index_t(plane_of(which)) * blocks + block) * cols;  // (cols,)
  }
};

}  // namespace flashjit
