#pragma once
// What the layer_norm kernels share: the config, which thread takes which columns of which
// row, and the merge of a value across the threads of a row (shuffles within each warp, then
// the warps' partials through shared memory).
#include "layer_norm/layer_norm_space.cuh"
#include "tile/memory.cuh"
#include "tile/warp.cuh"

namespace flashjit {

template <typename Element_, int MaxCols, int ThreadsPerRow, int VectorWidth, bool Rms>
struct LayerNormConfig {
  static_assert(layer_norm_space::config_valid(MaxCols, ThreadsPerRow, VectorWidth),
                "threads per row must be whole warps, the vector width 1, 2 or 4, and a bucket "
                "a multiple of threads · width with at most "
                "layer_norm_space::kMaxValuesPerThread values per thread");
  using Element = Element_;
  static constexpr int kMaxCols = MaxCols;  // 0: any row length, read twice
  static constexpr bool kCached = MaxCols > 0;
  static constexpr int kThreadsPerRow = ThreadsPerRow;
  static constexpr int kVectorWidth = VectorWidth;
  static constexpr bool kRms = Rms;  // RMS norm: no mean subtracted, no β
  static constexpr int kRowStep = ThreadsPerRow * VectorWidth;  // columns per step of a row
  static constexpr int kRowsPerBlock = layer_norm_space::rows_per_block(ThreadsPerRow);
  static constexpr int kBlockThreads = kThreadsPerRow * kRowsPerBlock;
  static constexpr int kWarpsPerRow = ThreadsPerRow / kWarpSize;
  static constexpr int kValuesPerThread = kCached ? MaxCols / ThreadsPerRow : 1;
  // __launch_bounds__'s blocks per SM: one lets ptxas use every register the block size
  // leaves; left to its default at 512 threads, it capped the streamed backward at 64 and
  // spilled 48 bytes.
  static constexpr int kMinBlocksPerSm = 1;
};

/// Where this thread works: its row of the block (a row index, or a backward slot) and its
/// lane among the row's threads.
struct RowLane {
  int row_in_block;
  int lane;
};

template <class Config>
FJ_DEVICE RowLane row_lane() {
  return {int(threadIdx.x) / Config::kThreadsPerRow, int(threadIdx.x) % Config::kThreadsPerRow};
}

/// The column of this thread's cached value i: chunks of kVectorWidth neighbours, the row's
/// threads side by side within each step of kRowStep columns.
template <class Config>
FJ_DEVICE int cached_column(int i, int lane) {
  constexpr int kWidth = Config::kVectorWidth;
  return (i / kWidth) * Config::kRowStep + lane * kWidth + i % kWidth;
}

/// Calls `visit(col)` for every column of a row of `cols` this thread takes, in the order
/// cached_column numbers them (any length: the unbounded config's walk).
template <class Config, class Visit>
FJ_DEVICE void for_each_column(int cols, int lane, Visit visit) {
  for (int base = lane * Config::kVectorWidth; base < cols; base += Config::kRowStep) {
#pragma unroll
    for (int v = 0; v < Config::kVectorWidth; ++v) {
      if (base + v < cols) visit(base + v);
    }
  }
}

/// Combines `value` across the threads of this thread's row with `combine` (associative; T
/// supplies shuffle_xor and shuffle_from, found by argument-dependent lookup); every thread of the
/// row gets lane 0's result, so all of them use the same bits. The shared-memory step ends with a
/// barrier, so the call may repeat (the backward's loop over rows).
template <class Config, typename T, class Combine>
FJ_DEVICE T row_allreduce(T value, RowLane at, Combine combine) {
  value = warp_allreduce(value, combine);
  value = shuffle_from(value, 0);  // a merge need not be commutative to the bit
  if constexpr (Config::kWarpsPerRow > 1) {
    static_assert(sizeof(T) <= layer_norm_space::kSharedBytesPerWarp, "a warp's slot is full");
    T* partials = dynamic_shared<T>();  // (kRowsPerBlock, kWarpsPerRow)
    const int first = at.row_in_block * Config::kWarpsPerRow;
    if (at.lane % kWarpSize == 0) store_shared(partials, first + at.lane / kWarpSize, value);
    __syncthreads();
    value = load_shared(partials, first);
    for (int warp = 1; warp < Config::kWarpsPerRow; ++warp) {
      value = combine(value, load_shared(partials, first + warp));
    }
    __syncthreads();  // every read done before a next call writes
  }
  return value;
}

}  // namespace flashjit
