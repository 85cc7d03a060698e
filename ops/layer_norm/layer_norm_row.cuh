#pragma once
// What the layer_norm kernels share: the config, which thread takes which vectors of which
// row, which rows a block takes, and the sum of a value across the threads of a row (shuffles
// within each warp, then the warps' partials through shared memory).
#include "layer_norm/layer_norm_space.cuh"
#include "tile/cluster.cuh"
#include "tile/vector_memory.cuh"
#include "tile/warp.cuh"

namespace flashjit {

template <typename Element_, int MaxCols, int ThreadsPerRow, int VectorWidth, bool Rms,
          int ClusterBlocks = 1>
struct LayerNormConfig {
  static_assert(layer_norm_space::config_valid(MaxCols, ThreadsPerRow, VectorWidth,
                                               sizeof(Element_)),
                "threads per row must be whole warps, a vector 1 element or 16 bytes, and a "
                "bucket a multiple of threads · width with at most "
                "layer_norm_space::kMaxValuesPerThread values per thread");
  static_assert(layer_norm_space::cluster_valid(MaxCols, ThreadsPerRow, VectorWidth,
                                                sizeof(Element_), ClusterBlocks),
                "a row splits over a cluster of 2, 4 or 8 blocks only in the unbounded "
                "bucket's 16-byte config at layer_norm_space::kClusterThreads threads");
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
  // __launch_bounds__'s blocks per SM, as many as each kernel's persistent grid puts on an SM
  // (the backward's one lets ptxas use every register the block size leaves; left to its
  // default at 512 threads, it capped the backward at 64 and spilled).
  static constexpr int kForwardBlocksPerSm = layer_norm_space::forward_blocks_per_sm(kBlockThreads);
  static constexpr int kBackwardBlocksPerSm = layer_norm_space::kBackwardBlocksPerSm;
  // Blocks of a cluster that share each row (the unbounded bucket only).
  static constexpr int kClusterBlocks = ClusterBlocks;
  // Where the unbounded bucket's stash starts: past the merge slots and the cluster's exchange.
  static constexpr int kStashOffset = layer_norm_space::merge_bytes(ThreadsPerRow) +
                                      layer_norm_space::exchange_bytes(ClusterBlocks);
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

/// The columns of each row this block takes, [begin, end): all of them, or its chunk of the
/// row when a cluster shares it. `local(col)` indexes the block's stash.
struct ColumnSpan {
  int begin;
  int end;
  int stash_cols;  // columns the stash holds a row of (the chunk's, padded alike in each block)

  FJ_DEVICE int local(int col) const { return col - begin; }
};

template <class Config>
FJ_DEVICE ColumnSpan block_columns(int cols) {
  const int chunk =
      layer_norm_space::cluster_chunk(cols, Config::kClusterBlocks, Config::kVectorWidth);
  if constexpr (Config::kClusterBlocks == 1) {
    return {0, cols, chunk};
  } else {
    const int begin = min_int(cols, int(cluster_ctarank()) * chunk);
    return {begin, min_int(cols, begin + chunk), chunk};
  }
}

/// Calls `visit(col)` for the first column of every vector of `span` this thread takes (the
/// unbounded config's walk; the span's ends are multiples of the vector width).
template <class Config, class Visit>
FJ_DEVICE void for_each_vector(ColumnSpan span, int lane, Visit visit) {
  for (int col = span.begin + lane * Config::kVectorWidth; col < span.end;
       col += Config::kRowStep) {
    visit(col);
  }
}

/// Which group of blocks shares a run of rows (a cluster, or the block alone), and how many
/// there are: the backward writes one partial per group.
template <class Config>
FJ_DEVICE int row_group_index() {
  return int(blockIdx.x) / Config::kClusterBlocks;
}
template <class Config>
FJ_DEVICE int row_group_count() {
  return int(gridDim.x) / Config::kClusterBlocks;
}

/// The rows this block takes: row groups of kRowsPerBlock rows, [begin, end), contiguous, so the
/// backward's sums over them run in row order (a cluster's blocks take the same rows).
struct BlockRows {
  index_t begin;
  index_t end;
};

template <class Config>
FJ_DEVICE BlockRows block_rows(index_t rows) {
  const index_t groups = (rows + Config::kRowsPerBlock - 1) / Config::kRowsPerBlock;
  const index_t blocks = row_group_count<Config>();
  const index_t per_block = (groups + blocks - 1) / blocks;
  const index_t begin = index_t(row_group_index<Config>()) * per_block;
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

/// A float's place in a cluster's exchange slot, written by this block and read by any.
FJ_DEVICE void store_exchange(float* slot, float value) { store_shared(slot, 0, value); }
FJ_DEVICE float load_exchange(const float* slot, unsigned rank, float /*type*/) {
  return load_shared_cluster(slot, rank);
}

/// Combines a block's `value` (the same in every thread) with its cluster peers' in rank order,
/// so every block gets the same bits. T supplies store_exchange and load_exchange (found by
/// argument-dependent lookup, or float's above). Successive calls alternate between two
/// exchange slots (`round` counts the calls), so one cluster barrier a call suffices; the
/// kernel ends with a cluster barrier of its own so that no block exits while a peer still
/// reads its slot.
template <class Config, typename T, class Combine>
FJ_DEVICE T cluster_allreduce(T value, int& round, Combine combine) {
  if constexpr (Config::kClusterBlocks == 1) {
    return value;
  } else {
    static_assert(sizeof(T) <= layer_norm_space::kSharedBytesPerWarp, "a sum fills one slot");
    float* slot = reinterpret_cast<float*>(dynamic_shared<unsigned char>() +
                                           layer_norm_space::merge_bytes(Config::kThreadsPerRow) +
                                           (round % 2) * layer_norm_space::kSharedBytesPerWarp);
    round += 1;
    if (threadIdx.x == 0) store_exchange(slot, value);
    cluster_sync();
    T total = load_exchange(slot, 0u, value);
    for (int rank = 1; rank < Config::kClusterBlocks; ++rank) {
      total = combine(total, load_exchange(slot, unsigned(rank), value));
    }
    return total;
  }
}

/// The row sum of a float (across the cluster too when one shares the row).
template <class Config>
FJ_DEVICE float row_sum(float value, RowLane at, int& round) {
  auto add = [](float a, float b) { return a + b; };
  return cluster_allreduce<Config>(row_allreduce<Config>(value, at, add), round, add);
}
template <class Config>
FJ_DEVICE float row_sum(float value, RowLane at) {
  static_assert(Config::kClusterBlocks == 1, "a cluster's row sums count their rounds");
  return row_allreduce<Config>(value, at, [](float a, float b) { return a + b; });
}

}  // namespace flashjit
