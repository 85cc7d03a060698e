#pragma once
// The combiner of docs/design.md, N-way: states (Oᵢ, LSEᵢ) computed over disjoint key sets
// merge into the exact state over their union,
//   LSE = log Σᵢ e^LSEᵢ,   O = Σᵢ e^(LSEᵢ − LSE) Oᵢ,
// which is a softmax over the partials' LSEs weighting their outputs. It is taken with the
// online softmax's statistics in base 2. A partial that saw no key (LSE = -inf) contributes
// nothing whatever its O holds, and a row where every partial saw none gives O = 0, LSE = -inf
// without a NaN. LSEs are
// natural-log in memory, as everywhere in flashjit's API.
#include "merge_states/merge_states_params.cuh"
#include "merge_states/merge_states_space.cuh"
#include "tile/memory.cuh"
#include "tile/online_softmax.cuh"
#include "tile/semaphore.cuh"

namespace flashjit {

template <typename Input_, typename Output_, int ThreadsPerRow, int ColumnsPerThread>
struct MergeStatesConfig {
  static_assert(merge_states_space::config_valid(ThreadsPerRow, ColumnsPerThread),
                "threads per row must divide the block (at most a warp) and columns per thread "
                "be 1, 2 or 4");
  using Input = Input_;    // the partials' O
  using Output = Output_;  // the merged O
  static constexpr int kThreadsPerRow = ThreadsPerRow;
  static constexpr int kColumnsPerThread = ColumnsPerThread;
  static constexpr int kRowsPerBlock = merge_states_space::rows_per_block(ThreadsPerRow);
  static constexpr int kBlockThreads = merge_states_space::kBlockThreads;
};

/// Whether A and B are one type (templates include no standard headers).
template <typename A, typename B>
struct same_type {
  static constexpr bool value = false;
};
template <typename A>
struct same_type<A, A> {
  static constexpr bool value = true;
};

/// Partial i's LSE in base 2 (-inf stays -inf).
template <class Params>
FJ_DEVICE float partial_lse2(const Params& p, int i, index_t token, int head) {
  return load_global(p.part_lse(i, token, head), 0) * kLog2e;
}

/// Row (token, head) of the merge, this thread's columns lane, lane + kThreadsPerRow, ...
/// `active` is false for a thread past the last row, which still reaches the barrier.
template <class Config, class Params>
FJ_DEVICE void merge_row(const Params& p, index_t token, int head, int lane, bool active) {
  constexpr int kStep = Config::kThreadsPerRow;
  constexpr int kColumns = Config::kColumnsPerThread;
  const int partials = active ? p.count() : 0;
  RowStats stats = empty_row_stats();
  for (int i = 0; i < partials; ++i) stats = push(stats, partial_lse2(p, i, token, head));  // m, ℓ
  const float inv_sum = inverse_sum(stats);
  auto* o_row = active ? p.out_o().template row<typename Config::Output>(token, head) : nullptr;
  for (int col0 = lane; active && col0 < p.head_dim; col0 += kStep * kColumns) {
    float o_acc[kColumns] = {};  // Σᵢ wᵢ Oᵢ over this thread's columns of the step
    for (int i = 0; i < partials; ++i) {
      const float lse2 = partial_lse2(p, i, token, head);
      const float weight = probability(lse2, stats, inv_sum);  // wᵢ
      // A partial that saw no key adds an exact 0, not 0 · Oᵢ: its O may hold anything, and
      // 0 · NaN would poison the row.
      const bool seen = lse2 != negative_infinity();
      const auto* part_row = p.template part_row<typename Config::Input>(i, token, head);
#pragma unroll
      for (int c = 0; c < kColumns; ++c) {
        const int col = col0 + c * kStep;
        if (col < p.head_dim) {
          const float value = load_global(part_row, col);
          o_acc[c] = fma_rn(weight, seen ? value : 0.0f, o_acc[c]);
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
      const int col = col0 + c * kStep;
      if (col < p.head_dim) store_global(o_row, col, o_acc[c]);
    }
  }
  // In place, lse_a is an input every lane of the row reads above: all reads first.
  if constexpr (Params::kInPlace) __syncthreads();
  if (active && lane == 0 && p.out_lse().data != nullptr) {
    const bool seen = stats.sum > 0.0f;  // some partial saw a key
    const float lse2 = seen ? stats.max + log2_approx(stats.sum) : negative_infinity();
    store_global(p.out_lse().at(token, head), 0, lse2 * kLn2);
  }
}

/// The row of this thread: kRowsPerBlock rows per block, kThreadsPerRow threads each; rows
/// run over (token, head) with head fastest.
template <class Config, class Params>
FJ_DEVICE void merge_block(const Params& p) {
  // Launched to overlap the grid before it (the split kernel whose partials it merges): its
  // launch hides behind that grid's tail, and nothing global is touched until that grid is done.
  wait_for_previous_grid();
  const int row_in_block = threadIdx.x / Config::kThreadsPerRow;
  const int lane = threadIdx.x % Config::kThreadsPerRow;
  const index_t row = index_t(blockIdx.x) * Config::kRowsPerBlock + row_in_block;
  const bool active = row < p.tokens * p.heads;
  merge_row<Config>(p, active ? row / p.heads : 0, active ? int(row % p.heads) : 0, lane, active);
}

/// N partial states stacked along a leading axis, merged into a separate output.
template <class Config>
FJ_GLOBAL void __launch_bounds__(Config::kBlockThreads)
    merge_states_kernel(const MergeStatesParams params) {
  merge_block<Config>(params);
}

/// State b merged into state a in place (O_a, LSE_a replaced by the merged state).
template <class Config>
FJ_GLOBAL void __launch_bounds__(Config::kBlockThreads)
    merge_state_pair_kernel(const MergeStatePairParams params) {
  static_assert(same_type<typename Config::Input, typename Config::Output>::value,
                "in place, O_a is both a partial and the output: one dtype");
  merge_block<Config>(params);
}

}  // namespace flashjit
