#pragma once
// Layer norm backward. With x̂ = (x − μ)·rstd and g = dy·γ per row of n columns,
//   dx = rstd · (g − (x̂·Σ g·x̂ + Σ g)/n)      (RMS norm: rstd · (g − x̂·Σ g·x̂/n)),
//   dγ = Σ_rows dy·x̂,   dβ = Σ_rows dy,   dbias = Σ_rows dx.
// The first kernel takes one row at a time (two sums across the row's threads, then dx) and
// adds each row's dγ, dβ, dbias terms into its slot's partials, rows in order; the second adds
// the slots' partials in slot order. No atomics: the same bits on every run.
#include "layer_norm/layer_norm_params.cuh"
#include "layer_norm/layer_norm_row.cuh"

namespace flashjit {

/// The two sums across a row that dx needs.
struct RowSums {
  float g_xhat;  // Σ g·x̂
  float g;       // Σ g
};

FJ_HOST_DEVICE RowSums add_sums(RowSums a, RowSums b) { return {a.g_xhat + b.g_xhat, a.g + b.g}; }

#if defined(FJ_DEVICE_CODE) || defined(FLASHJIT_EMULATOR)
FJ_DEVICE RowSums shuffle_xor(RowSums sums, int lane_mask) {
  return {__shfl_xor_sync(0xffffffffu, sums.g_xhat, lane_mask),
          __shfl_xor_sync(0xffffffffu, sums.g, lane_mask)};
}
FJ_DEVICE RowSums shuffle_from(RowSums sums, int src_lane) {
  return {__shfl_sync(0xffffffffu, sums.g_xhat, src_lane),
          __shfl_sync(0xffffffffu, sums.g, src_lane)};
}
#endif

/// One column's terms of a row: x̂, dy and g = dy·γ.
struct ColumnGrad {
  float x_hat;
  float dy;
  float g;
};

template <class Config>
FJ_DEVICE ColumnGrad column_grad(const LayerNormBackwardParams& p, index_t row, int col, float mean,
                                 float rstd) {
  using T = typename Config::Element;
  const float x_hat = (load_global(p.x.template row<const T>(row), col) - mean) * rstd;  // x̂
  const float dy = load_global(p.dy.template row<const T>(row), col);
  return {x_hat, dy, dy * load_global(static_cast<const T*>(p.gamma), col)};  // g = dy·γ
}

/// dx of one column from its x̂, g and the row's sums.
template <class Config>
FJ_DEVICE float input_grad(float x_hat, float g, RowSums sums, float rstd, float inv_cols) {
  const float mean_term = Config::kRms ? 0.0f : sums.g;
  return rstd * (g - fma_rn(x_hat, sums.g_xhat, mean_term) * inv_cols);
}

/// Adds `value` to column `col` of a workspace partial (only this thread touches it).
FJ_DEVICE void add_partial(float* partial, int col, float value) {
  store_global(partial, col, load_global(partial, col) + value);
}

/// A slot's rows with the row cached in registers: partials summed in registers, written once.
template <class Config>
FJ_DEVICE void backward_rows_cached(const LayerNormBackwardParams& p, int slot, index_t begin,
                                    index_t end, RowLane at) {
  using T = typename Config::Element;
  constexpr int kValues = Config::kValuesPerThread;
  const float inv_cols = 1.0f / float(p.cols);
  float dgamma[kValues] = {}, dbeta[kValues] = {}, dbias[kValues] = {};  // this slot's partials
  auto add = [](RowSums a, RowSums b) { return add_sums(a, b); };
  for (index_t row = begin; row < end; ++row) {
    const float mean = Config::kRms ? 0.0f : load_global(p.mean.at(row), 0);
    const float rstd = load_global(p.rstd.at(row), 0);
    ColumnGrad grads[kValues];  // this thread's columns of the row
    RowSums sums = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      const int col = cached_column<Config>(i, at.lane);
      grads[i] = col < p.cols ? column_grad<Config>(p, row, col, mean, rstd) : ColumnGrad{};
      sums = {fma_rn(grads[i].g, grads[i].x_hat, sums.g_xhat), sums.g + grads[i].g};
      dgamma[i] = fma_rn(grads[i].dy, grads[i].x_hat, dgamma[i]);  // dγ += dy·x̂
      dbeta[i] += grads[i].dy;                                     // dβ += dy
    }
    sums = row_allreduce<Config>(sums, at, add);  // Σ g·x̂, Σ g
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      const int col = cached_column<Config>(i, at.lane);
      if (col >= p.cols) continue;
      const float dx = input_grad<Config>(grads[i].x_hat, grads[i].g, sums, rstd, inv_cols);
      store_global(p.dx.template row<T>(row), col, dx);
      dbias[i] += dx;  // dbias += dx
    }
  }
#pragma unroll
  for (int i = 0; i < kValues; ++i) {
    const int col = cached_column<Config>(i, at.lane);
    if (col >= p.cols) continue;
    store_global(p.partial(0, slot), col, dgamma[i]);
    store_global(p.partial(1, slot), col, dbeta[i]);
    store_global(p.partial(2, slot), col, dbias[i]);
  }
}

/// A slot's rows of any length: each row read twice, partials summed in the workspace.
template <class Config>
FJ_DEVICE void backward_rows_streamed(const LayerNormBackwardParams& p, int slot, index_t begin,
                                      index_t end, RowLane at) {
  using T = typename Config::Element;
  const float inv_cols = 1.0f / float(p.cols);
  float* dgamma = p.partial(0, slot);  // (cols,)
  float* dbeta = p.partial(1, slot);   // (cols,)
  float* dbias = p.partial(2, slot);   // (cols,)
  for_each_column<Config>(p.cols, at.lane, [&](int col) {
    store_global(dgamma, col, 0.0f);
    store_global(dbeta, col, 0.0f);
    store_global(dbias, col, 0.0f);
  });
  auto add = [](RowSums a, RowSums b) { return add_sums(a, b); };
  for (index_t row = begin; row < end; ++row) {
    const float mean = Config::kRms ? 0.0f : load_global(p.mean.at(row), 0);
    const float rstd = load_global(p.rstd.at(row), 0);
    RowSums sums = {0.0f, 0.0f};
    for_each_column<Config>(p.cols, at.lane, [&](int col) {
      const ColumnGrad c = column_grad<Config>(p, row, col, mean, rstd);
      sums = {fma_rn(c.g, c.x_hat, sums.g_xhat), sums.g + c.g};
      store_global(dgamma, col, fma_rn(c.dy, c.x_hat, load_global(dgamma, col)));  // dγ += dy·x̂
      add_partial(dbeta, col, c.dy);                                               // dβ += dy
    });
    sums = row_allreduce<Config>(sums, at, add);  // Σ g·x̂, Σ g
    for_each_column<Config>(p.cols, at.lane, [&](int col) {
      const ColumnGrad c = column_grad<Config>(p, row, col, mean, rstd);
      const float dx = input_grad<Config>(c.x_hat, c.g, sums, rstd, inv_cols);
      store_global(p.dx.template row<T>(row), col, dx);
      add_partial(dbias, col, dx);  // dbias += dx
    });
  }
}

/// Slot s (kRowsPerBlock per block) takes rows [s·rows_per_slot, (s + 1)·rows_per_slot), in
/// order; every slot writes its partials, zeros when it has no row.
template <class Config>
FJ_GLOBAL void __launch_bounds__(Config::kBlockThreads, Config::kMinBlocksPerSm)
    layer_norm_backward_kernel(const LayerNormBackwardParams p) {
  const RowLane at = row_lane<Config>();
  const int slot = int(blockIdx.x) * Config::kRowsPerBlock + at.row_in_block;
  if (slot >= p.slots) return;  // only blocks of one-warp rows have such threads: no barrier
  const index_t first = slot * p.rows_per_slot;
  const index_t begin = first < p.rows ? first : p.rows;
  const index_t end = begin + p.rows_per_slot < p.rows ? begin + p.rows_per_slot : p.rows;
  if constexpr (Config::kCached) {
    backward_rows_cached<Config>(p, slot, begin, end, at);
  } else {
    backward_rows_streamed<Config>(p, slot, begin, end, at);
  }
}

/// dγ, dβ, dbias of one column each: the slots' partials added in slot order.
template <typename Element>
FJ_GLOBAL void __launch_bounds__(layer_norm_space::kParamGradThreads)
    layer_norm_param_grad_kernel(const LayerNormBackwardParams p) {
  const int col = int(blockIdx.x) * layer_norm_space::kParamGradThreads + int(threadIdx.x);
  if (col >= p.cols) return;
  float dgamma = 0.0f, dbeta = 0.0f, dbias = 0.0f;
  for (int slot = 0; slot < p.slots; ++slot) {
    dgamma += load_global(p.partial(0, slot), col);
    dbeta += load_global(p.partial(1, slot), col);
    dbias += load_global(p.partial(2, slot), col);
  }
  store_global(static_cast<Element*>(p.dgamma), col, dgamma);
  if (p.dbeta != nullptr) store_global(static_cast<Element*>(p.dbeta), col, dbeta);
  if (p.dbias != nullptr) store_global(static_cast<Element*>(p.dbias), col, dbias);
}

}  // namespace flashjit
