#pragma once
// Row-wise softmax, y = softmax(scale · x) over each row, built on the online softmax: one pass
// gets the row's max and sum together, a second normalizes. Rows up to the config's bucket are
// held in registers (x is read once); the unbounded config streams the row twice.
#include "softmax/softmax_space.cuh"
#include "tile/memory.cuh"
#include "tile/online_softmax.cuh"
#include "tile/warp.cuh"

namespace flashjit {

template <typename Element_, int MaxCols, int ThreadsPerRow>
struct SoftmaxConfig {
  static_assert(softmax_space::config_valid(MaxCols, ThreadsPerRow),
                "threads per row must be whole warps dividing the bucket, with at most "
                "softmax_space::kMaxValuesPerThread values per thread");
  using Element = Element_;
  static constexpr int kMaxCols = MaxCols;  // 0: any row length
  static constexpr int kThreadsPerRow = ThreadsPerRow;
  static constexpr int kRowsPerBlock = softmax_space::rows_per_block(ThreadsPerRow);
  static constexpr int kBlockThreads = kThreadsPerRow * kRowsPerBlock;
  static constexpr int kWarpsPerRow = ThreadsPerRow / kWarpSize;
  static constexpr int kValuesPerThread = MaxCols / ThreadsPerRow;
};

/// Merges the statistics of all threads of a row: shuffles within each warp, then the warps'
/// partials through shared memory.
template <class Config>
FJ_DEVICE RowStats reduce_row(RowStats stats, int row_in_block, int lane_in_row) {
  stats = warp_allreduce(stats, [](RowStats a, RowStats b) { return merge(a, b); });
  if constexpr (Config::kWarpsPerRow > 1) {
    float* partials = dynamic_shared<float>();  // (kRowsPerBlock, kWarpsPerRow, 2)
    const int row_base = row_in_block * Config::kWarpsPerRow * 2;
    if (lane_in_row % kWarpSize == 0) {
      const int slot = row_base + lane_in_row / kWarpSize * 2;
      store_shared(partials, slot, stats.max);
      store_shared(partials, slot + 1, stats.sum);
    }
    __syncthreads();
    stats = empty_row_stats();
    for (int warp = 0; warp < Config::kWarpsPerRow; ++warp) {
      const int slot = row_base + warp * 2;
      stats = merge(stats, {load_shared(partials, slot), load_shared(partials, slot + 1)});
    }
  }
  return stats;
}

/// One block handles kRowsPerBlock rows; kThreadsPerRow threads share a row, thread `lane`
/// taking columns lane, lane + kThreadsPerRow, ... (coalesced). x and y rows are
/// x_row_stride / y_row_stride elements apart; scale_log2 = scale · log2(e), folded on the host.
template <class Config>
FJ_GLOBAL void __launch_bounds__(Config::kBlockThreads)
    softmax_kernel(const typename Config::Element* x, typename Config::Element* y, index_t rows,
                   int cols, index_t x_row_stride, index_t y_row_stride, float scale_log2) {
  constexpr int kStep = Config::kThreadsPerRow;
  const int row_in_block = threadIdx.x / kStep;
  const int lane = threadIdx.x % kStep;
  const index_t row = index_t(blockIdx.x) * Config::kRowsPerBlock + row_in_block;
  const bool active = row < rows;  // idle threads still reach the block barrier
  const auto* x_row = x + (active ? row : 0) * x_row_stride;  // (cols,)
  auto* y_row = y + (active ? row : 0) * y_row_stride;        // (cols,)

  RowStats stats = empty_row_stats();
  if constexpr (Config::kMaxCols > 0) {
    float values[Config::kValuesPerThread];  // x · scale · log2(e), this thread's columns
#pragma unroll
    for (int i = 0; i < Config::kValuesPerThread; ++i) {
      const int col = i * kStep + lane;
      values[i] = active && col < cols ? load_global(x_row, col) * scale_log2 : negative_infinity();
      stats = push(stats, values[i]);  // m, ℓ
    }
    stats = reduce_row<Config>(stats, row_in_block, lane);
    const float inv_sum = inverse_sum(stats);
#pragma unroll
    for (int i = 0; i < Config::kValuesPerThread; ++i) {
      const int col = i * kStep + lane;
      if (active && col < cols) store_global(y_row, col, probability(values[i], stats, inv_sum));
    }
  } else {
    for (int col = lane; active && col < cols; col += kStep) {
      stats = push(stats, load_global(x_row, col) * scale_log2);  // m, ℓ
    }
    stats = reduce_row<Config>(stats, row_in_block, lane);
    const float inv_sum = inverse_sum(stats);
    for (int col = lane; active && col < cols; col += kStep) {
      const float value = load_global(x_row, col) * scale_log2;
      store_global(y_row, col, probability(value, stats, inv_sum));
    }
  }
}

}  // namespace flashjit
