#pragma once
// Layer norm forward, y = (x − μ)/√(σ² + ε) · γ + β per row (σ² biased, over the row's cols,
// as torch.nn.functional.layer_norm), and RMS norm, y = x/√(mean(x²) + ε) · γ. Optionally
// fused with the add before it, x = input + bias + residual, written out as the next block's
// residual. One pass over the row: each thread takes Welford's statistics of its columns, the
// row's threads merge them (Chan), and the row is normalized from registers (from a second
// read, for the unbounded config). Writes μ and rstd = 1/√(σ² + ε) in fp32 for the backward.
#include "layer_norm/layer_norm_params.cuh"
#include "layer_norm/layer_norm_row.cuh"
#include "layer_norm/welford.cuh"

namespace flashjit {

/// x[row, col] = input (+ bias) (+ residual), rounded to the element type when fused: the sum
/// the forward writes and the backward reads back, so both see the same x.
template <class Config>
FJ_DEVICE float load_x(const LayerNormParams& p, index_t row, int col) {
  using T = typename Config::Element;
  float x = load_global(p.input.template row<const T>(row), col);
  if (p.bias == nullptr && !p.residual.present()) return x;
  if (p.bias != nullptr) x += load_global(static_cast<const T*>(p.bias), col);
  if (p.residual.present()) x += load_global(p.residual.template row<const T>(row), col);
  return to_float(from_float<T>(x));
}

/// x, written to the sum output when the call asks for it; returned shifted by the row's
/// first value K (0 for RMS norm), which keeps the statistics of a row with a large mean
/// accurate: values of one magnitude subtract exactly.
template <class Config>
FJ_DEVICE float read_x(const LayerNormParams& p, index_t row, int col, float shift, bool store) {
  const float x = load_x<Config>(p, row, col);
  if (store && p.sum.present()) {
    store_global(p.sum.template row<typename Config::Element>(row), col, x);
  }
  return x - shift;
}

/// A row's normalization: x̂ = (x − K − μ_K)·rstd with μ_K the mean of x − K.
struct RowNorm {
  float shifted_mean;  // μ_K (0 for RMS norm)
  float rstd;
};

/// μ and rstd from the merged statistics of the shifted row; lane 0 writes them.
template <class Config>
FJ_DEVICE RowNorm row_norm(const LayerNormParams& p, WelfordStats stats, float shift, index_t row,
                           bool writer) {
  const float variance = stats.m2 / stats.count;  // biased: 1/n
  RowNorm norm;
  if constexpr (Config::kRms) {
    const float mean_square = fma_rn(stats.mean, stats.mean, variance);  // no shift for RMS
    norm = {0.0f, 1.0f / sqrt_rn(mean_square + p.epsilon)};
  } else {
    norm = {stats.mean, 1.0f / sqrt_rn(variance + p.epsilon)};
  }
  if (writer && p.mean.present()) store_global(p.mean.at(row), 0, shift + norm.shifted_mean);
  if (writer && p.rstd.present()) store_global(p.rstd.at(row), 0, norm.rstd);
  return norm;
}

/// y = x̂·γ + β (x̂·γ for RMS norm).
template <class Config>
FJ_DEVICE void store_y(const LayerNormParams& p, index_t row, int col, float x_shifted,
                       RowNorm norm) {
  using T = typename Config::Element;
  const float x_hat = (x_shifted - norm.shifted_mean) * norm.rstd;  // x̂
  const float gamma = load_global(static_cast<const T*>(p.gamma), col);
  const float beta = Config::kRms ? 0.0f : load_global(static_cast<const T*>(p.beta), col);
  store_global(p.y.template row<T>(row), col, fma_rn(x_hat, gamma, beta));
}

/// One block handles kRowsPerBlock rows, kThreadsPerRow threads each (cached_column and
/// for_each_column say which columns a thread takes).
template <class Config>
FJ_GLOBAL void __launch_bounds__(Config::kBlockThreads, Config::kMinBlocksPerSm)
    layer_norm_kernel(const LayerNormParams p) {
  const RowLane at = row_lane<Config>();
  const index_t row_index = index_t(blockIdx.x) * Config::kRowsPerBlock + at.row_in_block;
  const bool active = row_index < p.rows;  // idle threads still reach the block barrier
  const index_t row = active ? row_index : 0;
  const float shift = Config::kRms || !active ? 0.0f : load_x<Config>(p, row, 0);  // K
  auto merge = [](WelfordStats a, WelfordStats b) { return chan_merge(a, b); };
  WelfordStats stats = empty_welford();
  if constexpr (Config::kCached) {
    float x_shifted[Config::kValuesPerThread];  // x − K, this thread's columns
#pragma unroll
    for (int i = 0; i < Config::kValuesPerThread; ++i) {
      const int col = cached_column<Config>(i, at.lane);
      x_shifted[i] = active && col < p.cols ? read_x<Config>(p, row, col, shift, true) : 0.0f;
      if (active && col < p.cols) stats = welford_push(stats, x_shifted[i]);  // n, μ, M2
    }
    stats = row_allreduce<Config>(stats, at, merge);  // Chan across the row
    const RowNorm norm = row_norm<Config>(p, stats, shift, row, active && at.lane == 0);
#pragma unroll
    for (int i = 0; i < Config::kValuesPerThread; ++i) {
      const int col = cached_column<Config>(i, at.lane);
      if (active && col < p.cols) store_y<Config>(p, row, col, x_shifted[i], norm);
    }
  } else {
    const int cols = active ? p.cols : 0;
    for_each_column<Config>(cols, at.lane, [&](int col) {
      stats = welford_push(stats, read_x<Config>(p, row, col, shift, true));  // n, μ, M2
    });
    stats = row_allreduce<Config>(stats, at, merge);  // Chan across the row
    const RowNorm norm = row_norm<Config>(p, stats, shift, row, active && at.lane == 0);
    for_each_column<Config>(cols, at.lane, [&](int col) {
      store_y<Config>(p, row, col, read_x<Config>(p, row, col, shift, false), norm);
    });
  }
}

}  // namespace flashjit
