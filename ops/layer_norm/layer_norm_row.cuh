#pragma once
// What the layer_norm kernels share: the config, which thread takes which vectors of which
// row, which rows a block takes, and the sum of a value across the threads of a row (shuffles
// within each warp, then the warps' partials through shared memory).
#include "layer_norm/layer_norm_space.cuh"
#include "tile/vector_memory.cuh"
#include "tile/warp.cuh"

namespace flashjit {

template <typename Element_, int MaxCols, int ThreadsPerRow, int VectorWidth, bool Rms>
struct LayerNormConfig {
  static_assert(layer_norm_space::config_valid(MaxCols, ThreadsPerRow, VectorWidth,
                                               sizeof(Element_)),
                "threads per row must be whole warps, a vector 1 element or 16 bytes, and a "
                "bucket a multiple of threads · width with at most "
                "layer_norm_space::kMaxValuesPerThread values per thread");
  using Element = Element_;
  static constexpr int kMaxCols = MaxCols;  // 0: any row length, kept in shared memory
  static constexpr bool kCached = MaxCols > 0;
  static constexpr int kThreadsPerRow = ThreadsPerRow;
  static constexpr int kVectorWidth = VectorWidth;
  static constexpr bool kRms = Rms;  // RMS norm: no mean subtracted, no β
  static constexpr int kRowStep = ThreadsPerRow * VectorWidth;  // columns per step of a row
  static constexpr int kRowsPerBlock = layer_norm_space::rows_per_block(ThreadsPerRow);
  static constexpr int kBlockThreads = kThreadsPerRow * kRowsPerBlock;
  static constexpr int kWarpsPerRow = ThreadsPerRow / kWarpSize;
  // A thread's vectors of a row held in registers (the bounded buckets).
  static constexpr int kVectorsPerThread = kCached ? MaxCols / kRowStep : 1;
  // __launch_bounds__'s blocks per SM: one lets ptxas use every register the block size
  // leaves; left to its default at 512 threads, it capped the backward at 64 and spilled.
  static constexpr int kMinBlocksPerSm = 1;
};

/// A thread's vector of kVectorWidth neighbouring values, in fp32.
template <class Config>
using RowVector = float[Config::kVectorWidth];

/// Where this thread works: its row of the block and its lane among the row's threads.
struct RowLane {
  int row_in_block;
  int lane;
};

template <class Config>
FJ_DEVICE RowLane row_lane() {
  return {int(threadIdx.x) / Config::kThreadsPerRow, int(threadIdx.x) % Config::kThreadsPerRow};
}

/// The first column of this thread's vector i of a row: the row's threads side by side within
/// each step of kRowStep columns, so a warp's accesses are contiguous.
template <class Config>
FJ_DEVICE int vector_column(int i, int lane) {
  return i * Config::kRowStep + lane * Config::kVectorWidth;
}

/// Calls `visit(col)` for the first column of every vector of a row of `cols` this thread
/// takes (the unbounded config's walk; cols is a multiple of the vector width).
template <class Config, class Visit>
FJ_DEVICE void for_each_vector(int cols, int lane, Visit visit) {
  for (int col = lane * Config::kVectorWidth; col < cols; col += Config::kRowStep) visit(col);
}

/// The rows this block takes: row groups of kRowsPerBlock rows, [begin, end), contiguous, so the
/// backward's sums over them run in row order.
struct BlockRows {
  index_t begin;
  index_t end;
};

template <class Config>
FJ_DEVICE BlockRows block_rows(index_t rows) {
  const index_t groups = (rows + Config::kRowsPerBlock - 1) / Config::kRowsPerBlock;
  const index_t per_block = (groups + gridDim.x - 1) / gridDim.x;
  const index_t begin = index_t(blockIdx.x) * per_block;
  const index_t end = begin + per_block < groups ? begin + per_block : groups;
  return {begin < groups ? begin : groups, end};
}

/// Combines `value` across the threads of this thread's row with `combine` (associative; T
/// supplies shuffle_xor and shuffle_from, found by argument-dependent lookup, or is float);
/// every thread of the row gets the same bits. The shared-memory step ends with a barrier, so
/// the call may repeat (a loop over rows).
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

/// The row sum of a float.
template <class Config>
FJ_DEVICE float row_sum(float value, RowLane at) {
  return row_allreduce<Config>(value, at, [](float a, float b) { return a + b; });
}

}  // namespace flashjit
