#pragma once
// The end of the decode kernel: the exact LSE combiner (docs/design.md), twice. First the CTA's
// warps, each of which saw its own chunks of the keys, are merged into the CTA's rows; then,
// with split-KV, the last CTA of a (sequence, head, query block) to finish merges every split's
// partial in the same launch, found by a counter the splits arrive at (SplitOutputs::
// arrivals), which it leaves at zero for the next call.
#include "attention/decode/decode_space.cuh"
#include "attention/parts/forward_block.cuh"
#include "attention/parts/forward_softmax.cuh"  // finished_lse
#include "tile/online_softmax.cuh"
#include "tile/register_tile.cuh"
#include "tile/semaphore.cuh"

namespace flashjit {

/// A part of a row's result (natural-log LSEs) folded into its statistics in the base-2 domain.
FJ_DEVICE RowStats push_lse(RowStats stats, float lse) { return push(stats, lse * kLog2e); }
/// A part's weight in the merged row: 2^(lse·log2 e − m) / ℓ (0 for a part that saw no key).
FJ_DEVICE float part_weight(RowStats stats, float lse) {
  return rescale(lse * kLog2e, stats.max) * inverse_sum(stats);
}
/// The merged row's natural-log LSE (−inf when no part saw a key).
FJ_DEVICE float merged_lse(RowStats stats) { return finished_lse(stats.max, stats.sum, 1.0f); }

template <class Traits>
struct DecodeMerge {
  static constexpr int kRows = Traits::kRows;
  static constexpr int kWarps = Traits::kWarps;
  static constexpr int kCols = Traits::kHeadDimPadded;
  /// O's rows 8 floats apart beyond its columns: a warp's pair stores of a fragment (8 rows, 4
  /// column pairs) then fall on distinct banks, two wavefronts a store.
  static constexpr int kStride = attention_decode_space::merge_row_stride(Traits::kHeadDim);
  static constexpr int kThreads = Traits::kThreads;

  float* o;              // [kWarps][kRows][kStride]: each warp's normalized O
  float* lse;            // [kWarps][kRows]: each warp's LSE
  float* weights;        // [kWarps][kRows]: each warp's weight in its row
  float* row_lse;        // [kRows]: the merged rows' LSE
  float* split_weights;  // [kMaxSplits][kRows]: each split's weight in each row
  int* last_flag;        // whether this CTA is its splits' last

  /// The merge's arrays in `base` (the rings' memory, once every warp is done with its ring).
  FJ_DEVICE explicit DecodeMerge(unsigned char* base) {
    o = reinterpret_cast<float*>(base);
    lse = o + kWarps * kRows * kStride;
    weights = lse + kWarps * kRows;
    row_lse = weights + kWarps * kRows;
    split_weights = row_lse + kRows;
    last_flag = reinterpret_cast<int*>(split_weights + kRows * attention_decode_space::kMaxSplits);
  }

  /// Warp `warp`'s normalized Oᵀ (its rows as columns) and its rows' LSE, kept for the merge
  /// as rows of O.
  template <int Dims>
  FJ_DEVICE void keep(int warp, acc_tile<Dims, kRows>& o_t, const col_vec<kRows>& row_lses,
                      int lane) const {
    float* own = o + warp * kRows * kStride;
    for_each_element(o_t, lane,
                     [&](int d, int r, float& x) { store_shared(own, r * kStride + d, x); });
    if (lane >= 4) return;  // the 8 lanes of a column hold the same LSE
#pragma unroll
    for (int group = 0; group < kRows / 8; ++group)
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        store_shared(lse, warp * kRows + fragment_col(group, pair, lane), row_lses.v[group][pair]);
      }
  }

  /// Each warp's weight in each of the first `rows` rows, and the rows' LSE (after a barrier
  /// that follows every warp's keep; a barrier follows).
  FJ_DEVICE void weigh_warps(int rows) const {
    const int r = threadIdx.x;
    if (r >= rows) return;
    RowStats stats = empty_row_stats();
    for (int w = 0; w < kWarps; ++w) stats = push_lse(stats, load_shared(lse, w * kRows + r));
    for (int w = 0; w < kWarps; ++w) {
      store_shared(weights, w * kRows + r, part_weight(stats, load_shared(lse, w * kRows + r)));
    }
    store_shared(row_lse, r, merged_lse(stats));
  }

  /// Element (r, c) of the CTA's merged O.
  FJ_DEVICE float merged(int r, int c) const {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      sum += load_shared(weights, w * kRows + r) * load_shared(o, (w * kRows + r) * kStride + c);
    }
    return sum;
  }

  /// The CTA's rows out: O rounded to the output type and LSE (when asked for).
  template <class Block>
  FJ_DEVICE void store_output(const Block& block, const AttentionForwardParams& p) const {
    using T = typename Traits::Element;
    for (int e = threadIdx.x; e < block.rows * p.head_dim_v; e += kThreads) {
      const int r = e / p.head_dim_v, c = e % p.head_dim_v;
      store_global(block.template query_row<T>(p.o, r), c, merged(r, c));
    }
    if (p.lse != nullptr && int(threadIdx.x) < block.rows) {
      store_global(block.lse_at(p, threadIdx.x), 0, load_shared(row_lse, threadIdx.x));
    }
  }

  /// Split-KV: the CTA's rows as its split's fp32 partial; then whether this CTA is the last of
  /// its (sequence, head, query block) to finish, which merges them all. Every thread calls it.
  template <class Block>
  FJ_DEVICE bool store_partial_and_arrive(const Block& block,
                                          const AttentionForwardParams& p) const {
    for (int e = threadIdx.x; e < block.rows * p.head_dim_v; e += kThreads) {
      const int r = e / p.head_dim_v, c = e % p.head_dim_v;
      store_global(block.partial_o_row(p, r), c, merged(r, c));
    }
    if (int(threadIdx.x) < block.rows) {
      store_global(block.partial_lse_at(p, threadIdx.x), 0, load_shared(row_lse, threadIdx.x));
    }
    global_fence();  // each thread's partial before the arrival
    __syncthreads();
    if (threadIdx.x == 0) {
      const int query_blocks = int(gridDim.x) / block.splits;
      const index_t counter =
          (index_t(blockIdx.z) * gridDim.y + blockIdx.y) * query_blocks + blockIdx.x / block.splits;
      const bool last = semaphore_arrive_add(p.split.arrivals + counter, 1) == block.splits - 1;
      if (last) store_global_raw(p.split.arrivals + counter, 0);  // ready for the next call
      store_shared(last_flag, 0, int(last));
    }
    __syncthreads();
    const bool last = load_shared(last_flag, 0) != 0;
    if (last) global_fence();  // the other splits' partials after their arrivals
    return last;
  }

  /// The last split's CTA: every split's partial merged into O and LSE. The splits' LSEs come
  /// into shared memory at once (one load a thread), and each output element reads the other
  /// splits' partials in unrolled batches of independent loads (its own split's O it has), so
  /// the merge waits a few load latencies, not one per split and element: one thread walking
  /// 32 splits' loads in turn, each behind a branch, kept an H200 about 100 µs on a batch-1
  /// decode of 4096 keys (2026-12-04).
  template <class Block>
  FJ_DEVICE void merge_splits(const Block& block, const AttentionForwardParams& p) const {
    using T = typename Traits::Element;
    const int splits = block.splits;
    float* split_lses = split_weights;  // [kMaxSplits][kRows]: the LSEs, then the weights
    for (int e = threadIdx.x; e < splits * block.rows; e += kThreads) {
      const int s = e / block.rows, r = e % block.rows;
      store_shared(split_lses, s * kRows + r,
                   s == block.split ? load_shared(row_lse, r)
                                    : load_global(block.partial_lse_at(p, r, s), 0));
    }
    __syncthreads();
    const int r = threadIdx.x;
    if (r < block.rows) {
      RowStats stats = empty_row_stats();
      for (int s = 0; s < splits; ++s) {
        stats = push_lse(stats, load_shared(split_lses, s * kRows + r));
      }
      for (int s = 0; s < splits; ++s) {  // each slot read, then overwritten, by its row's thread
        const int at = s * kRows + r;
        store_shared(split_weights, at, part_weight(stats, load_shared(split_lses, at)));
      }
      if (p.lse != nullptr) store_global(block.lse_at(p, r), 0, merged_lse(stats));
    }
    __syncthreads();
    for (int e = threadIdx.x; e < block.rows * p.head_dim_v; e += kThreads) {
      const int row = e / p.head_dim_v, c = e % p.head_dim_v;
      // This CTA's own split first (its O is here), then the others', every load unconditional.
      float sum = load_shared(split_weights, block.split * kRows + row) * merged(row, c);
#pragma unroll 8
      for (int other = 0; other < splits - 1; ++other) {
        const int s = other + (other >= block.split ? 1 : 0);
        sum += load_shared(split_weights, s * kRows + row) *
               load_global(block.partial_o_row(p, row, s), c);
      }
      store_global(block.template query_row<T>(p.o, row), c, sum);
    }
  }
};

}  // namespace flashjit
