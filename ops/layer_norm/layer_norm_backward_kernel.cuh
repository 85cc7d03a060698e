#pragma once
// Layer norm backward. With x̂ = (x − μ)·rstd and g = dy·γ per row of n columns,
//   dx = rstd · (g − (x̂·Σ g·x̂ + Σ g)/n)      (RMS norm: rstd · (g − x̂·Σ g·x̂/n)),
//   dγ = Σ_rows dy·x̂,   dβ = Σ_rows dy,   dbias = Σ_rows dx.
// A persistent kernel: each block takes a contiguous run of rows, keeps γ and its partial dγ,
// dβ, dbias on chip across them (registers for the bounded buckets, shared memory for the
// unbounded one where they fit) and writes one partial per block; the second kernel adds the
// blocks' partials in block order. Vector loads and stores; no atomics: the same bits on every
// run of the same grid.
#include "layer_norm/layer_norm_kernel.cuh"

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

/// RowSums' place in a cluster's exchange slot (layer_norm_row.cuh's cluster_allreduce).
FJ_DEVICE void store_exchange(float* slot, RowSums sums) {
  store_shared(slot, 0, sums.g_xhat);
  store_shared(slot, 1, sums.g);
}
FJ_DEVICE RowSums load_exchange(const float* slot, unsigned rank, RowSums /*type*/) {
  return {load_shared_cluster(slot, rank), load_shared_cluster(slot + 1, rank)};
}

/// A row's statistics as the forward wrote them.
struct RowStats {
  float mean;  // 0 for RMS norm
  float rstd;
};

/// Lane 0 of each warp reads them and shuffles them to the others (every lane takes part).
template <class Config>
FJ_DEVICE RowStats row_stats(const LayerNormBackwardParams& p, index_t row, bool active) {
  RowStats stats = {0.0f, 0.0f};
  if (active && threadIdx.x % kWarpSize == 0) {
    stats = {Config::kRms ? 0.0f : load_global(p.mean.at(row), 0), load_global(p.rstd.at(row), 0)};
  }
  return {shuffle_from(stats.mean, 0), shuffle_from(stats.rstd, 0)};
}

/// One vector's terms of a row: x̂ and g = dy·γ (dy kept for dγ and dβ), and the row sums
/// they add to.
template <class Config>
struct VectorGrad {
  RowVector<Config> x_hat, dy, g;

  FJ_DEVICE VectorGrad(const RowVector<Config>& x, const RowVector<Config>& dy_,
                       const RowVector<Config>& gamma, RowStats stats) {
#pragma unroll
    for (int i = 0; i < Config::kVectorWidth; ++i) {
      x_hat[i] = (x[i] - stats.mean) * stats.rstd;
      dy[i] = dy_[i];
      g[i] = dy_[i] * gamma[i];
    }
  }
  FJ_DEVICE RowSums add_to(RowSums sums) const {
#pragma unroll
    for (int i = 0; i < Config::kVectorWidth; ++i) {
      sums = {fma_rn(g[i], x_hat[i], sums.g_xhat), sums.g + g[i]};
    }
    return sums;
  }
  /// dx from the row's sums.
  FJ_DEVICE void input_grad(RowSums sums, float rstd, float inv_cols, RowVector<Config>& dx) const {
    const float mean_term = Config::kRms ? 0.0f : sums.g;
#pragma unroll
    for (int i = 0; i < Config::kVectorWidth; ++i) {
      dx[i] = rstd * (g[i] - fma_rn(x_hat[i], sums.g_xhat, mean_term) * inv_cols);
    }
  }
};

/// A thread's partial dγ, dβ, dbias of one vector of columns.
template <class Config>
struct VectorPartials {
  RowVector<Config> sum[3];  // dγ, dβ, dbias

  FJ_DEVICE void zero() {
    for (auto& s : sum) fill_zero(s);
  }
  /// dγ += dy·x̂, dβ += dy (dbias is added with dx).
  FJ_DEVICE void add(const VectorGrad<Config>& grad) {
#pragma unroll
    for (int i = 0; i < Config::kVectorWidth; ++i) {
      sum[0][i] = fma_rn(grad.dy[i], grad.x_hat[i], sum[0][i]);
      sum[1][i] += grad.dy[i];
    }
  }
  FJ_DEVICE void add_dx(const RowVector<Config>& dx) {
#pragma unroll
    for (int i = 0; i < Config::kVectorWidth; ++i) sum[2][i] += dx[i];
  }
};

/// Whether the call writes sum `which` (0 dγ, 1 dβ, 2 dbias).
FJ_DEVICE bool writes_sum(const LayerNormBackwardParams& p, int which) {
  return which == 0 || (which == 1 ? p.dbeta != nullptr : p.dbias != nullptr);
}

/// Writes this thread's partials to the block's in the workspace.
template <class Config>
FJ_DEVICE void store_partials(const LayerNormBackwardParams& p,
                              const VectorPartials<Config> (&partials)[Config::kVectorsPerThread],
                              int lane) {
#pragma unroll
  for (int v = 0; v < Config::kVectorsPerThread; ++v) {
    const int col = vector_column<Config>(v, lane);
    for (int which = 0; which < 3; ++which) {
      if (writes_sum(p, which) && col < p.cols) {
        store_global_vector(p.partial(which, blockIdx.x), col, partials[v].sum[which]);
      }
    }
  }
}

/// A block of several row slots: slot 0's partials go to shared memory, each further slot adds
/// its own in turn (row order, so the same bits every run), and slot 0 writes the block's.
template <class Config>
FJ_DEVICE void add_block_partials(const LayerNormBackwardParams& p,
                                  VectorPartials<Config> (&partials)[Config::kVectorsPerThread],
                                  RowLane at) {
  float* shared = reinterpret_cast<float*>(dynamic_shared<unsigned char>() +
                                           layer_norm_space::merge_bytes(Config::kThreadsPerRow));
  for (int slot = 0; slot < Config::kRowsPerBlock; ++slot) {
    if (at.row_in_block == slot) {
#pragma unroll
      for (int v = 0; v < Config::kVectorsPerThread; ++v) {
        const int col = vector_column<Config>(v, at.lane);
        for (int which = 0; which < 3; ++which) {
          if (!writes_sum(p, which) || col >= p.cols) continue;
          float* sum = shared + which * Config::kMaxCols;
          RowVector<Config> before;
          fill_zero(before);
          if (slot > 0) load_shared_vector(sum, col, before);
#pragma unroll
          for (int i = 0; i < Config::kVectorWidth; ++i) before[i] += partials[v].sum[which][i];
          if (slot + 1 < Config::kRowsPerBlock) {
            store_shared_vector(sum, col, before);
          } else {
            store_global_vector(p.partial(which, blockIdx.x), col, before);
          }
        }
      }
    }
    __syncthreads();
  }
}

/// A row slot's x, dy and statistics of one group as loaded and not yet used: x and dy as
/// memory holds them (RawVector), the statistics in lane 0 of each warp, so the loads stay in
/// flight until the row is reached.
template <class Config>
struct LoadedGradGroup {
  using Raw = RawVector<typename Config::Element, Config::kVectorWidth>;
  Raw x[Config::kVectorsPerThread];
  Raw dy[Config::kVectorsPerThread];
  RowStats stats;
  static constexpr int kBytes =
      2 * Config::kVectorWidth * int(sizeof(typename Config::Element)) * Config::kVectorsPerThread;
  static constexpr int kRegisters = 2 * Raw::kWords * Config::kVectorsPerThread + 2;
};

/// Starts the loads of the row slot's x, dy and statistics of group `group` (nothing past the
/// rows and the row's columns).
template <class Config>
FJ_DEVICE void load_grad_group(const LayerNormBackwardParams& p, index_t group, RowLane at,
                               LoadedGradGroup<Config>& out) {
  using T = typename Config::Element;
  const index_t row = group * Config::kRowsPerBlock + at.row_in_block;
  if (row >= p.rows) return;
  if (threadIdx.x % kWarpSize == 0) {
    out.stats = {Config::kRms ? 0.0f : load_global(p.mean.at(row), 0),
                 load_global(p.rstd.at(row), 0)};
  }
#pragma unroll
  for (int v = 0; v < Config::kVectorsPerThread; ++v) {
    const int col = vector_column<Config>(v, at.lane);
    if (col >= p.cols) continue;
    load_global_raw(p.x.template row<const T>(row), col, out.x[v]);
    load_global_raw(p.dy.template row<const T>(row), col, out.dy[v]);
  }
}

/// The row slot's x and dy of group `group` from its loads (zeros past the rows and the
/// columns), and the row's statistics, shuffled from lane 0 (zeros past the rows).
template <class Config>
FJ_DEVICE RowStats grad_group_rows(const LayerNormBackwardParams& p, index_t group, RowLane at,
                                   const LoadedGradGroup<Config>& loaded,
                                   RowVector<Config> (&x)[Config::kVectorsPerThread],
                                   RowVector<Config> (&dy)[Config::kVectorsPerThread]) {
  const index_t row = group * Config::kRowsPerBlock + at.row_in_block;
  const bool active = row < p.rows;
#pragma unroll
  for (int v = 0; v < Config::kVectorsPerThread; ++v) {
    fill_zero(x[v]);
    fill_zero(dy[v]);
    if (active && vector_column<Config>(v, at.lane) < p.cols) {
      widen(loaded.x[v], x[v]);
      widen(loaded.dy[v], dy[v]);
    }
  }
  const RowStats stats = {shuffle_from(loaded.stats.mean, 0), shuffle_from(loaded.stats.rstd, 0)};
  return active ? stats : RowStats{0.0f, 0.0f};
}

/// The row slot's x and dy of group `group` loaded one vector after the other (zeros past the
/// rows and the columns), and its statistics: where no group fits in registers ahead of its use.
template <class Config>
FJ_DEVICE RowStats load_grad_rows_now(const LayerNormBackwardParams& p, index_t group, RowLane at,
                                      RowVector<Config> (&x)[Config::kVectorsPerThread],
                                      RowVector<Config> (&dy)[Config::kVectorsPerThread]) {
  using T = typename Config::Element;
  const index_t row = group * Config::kRowsPerBlock + at.row_in_block;
  const bool active = row < p.rows;
#pragma unroll
  for (int v = 0; v < Config::kVectorsPerThread; ++v) {
    const int col = vector_column<Config>(v, at.lane);
    fill_zero(x[v]);
    fill_zero(dy[v]);
    if (active && col < p.cols) {
      load_global_vector(p.x.template row<const T>(row), col, x[v]);
      load_global_vector(p.dy.template row<const T>(row), col, dy[v]);
    }
  }
  return row_stats<Config>(p, row, active);
}

/// The bounded buckets: γ, the row's terms and the block's partials in registers; the block's
/// row slots' partials are added in shared memory before the one write. The next kAhead groups'
/// x, dy and statistics load while this one's sums, barriers and stores run (one group, loaded
/// at its row's start, left 16 KB an SM in flight, and only while loading).
template <class Config>
FJ_DEVICE void backward_rows_in_registers(const LayerNormBackwardParams& p) {
  using T = typename Config::Element;
  constexpr int kVectors = Config::kVectorsPerThread;
  const RowLane at = row_lane<Config>();
  RowVector<Config> gamma[kVectors];
  load_block_params<Config>(p.cols, p.gamma, at, gamma);
  VectorPartials<Config> partials[kVectors];
#pragma unroll
  for (int v = 0; v < kVectors; ++v) partials[v].zero();
  const float inv_cols = 1.0f / float(p.cols);
  auto add = [](RowSums a, RowSums b) { return add_sums(a, b); };
  const BlockRows rows = block_rows<Config>(p.rows);
  constexpr int kAhead = layer_norm_space::row_groups_ahead(
      Config::kBlockThreads * Config::kBackwardBlocksPerSm, kVectors * Config::kVectorWidth, kVectors,
      layer_norm_space::kBackwardRegistersPerValue, LoadedGradGroup<Config>::kBytes,
      LoadedGradGroup<Config>::kRegisters);
  LoadedGradGroup<Config> ahead[kAhead > 0 ? kAhead : 1] = {};  // groups group .. + kAhead - 1
#pragma unroll
  for (int k = 0; k < kAhead; ++k) {
    if (rows.begin + k < rows.end) load_grad_group<Config>(p, rows.begin + k, at, ahead[k]);
  }
  for (index_t group = rows.begin; group < rows.end; ++group) {
    const index_t row = group * Config::kRowsPerBlock + at.row_in_block;
    const bool active = row < p.rows;  // idle threads still reach the block barriers
    RowVector<Config> x[kVectors], dy[kVectors];
    const RowStats stats = kAhead == 0
                               ? load_grad_rows_now<Config>(p, group, at, x, dy)
                               : grad_group_rows<Config>(p, group, at, ahead[0], x, dy);
    if constexpr (kAhead > 0) {
#pragma unroll
      for (int k = 0; k + 1 < kAhead; ++k) ahead[k] = ahead[k + 1];
      if (group + kAhead < rows.end) {
        load_grad_group<Config>(p, group + kAhead, at, ahead[kAhead - 1]);
      }
    }
    RowSums sums = {0.0f, 0.0f};
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      const VectorGrad<Config> grad(x[v], dy[v], gamma[v], stats);
      sums = grad.add_to(sums);
      partials[v].add(grad);
    }
    sums = row_allreduce<Config>(sums, at, add);  // Σ g·x̂, Σ g
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      const int col = vector_column<Config>(v, at.lane);
      if (!active || col >= p.cols) continue;
      RowVector<Config> dx;
      VectorGrad<Config>(x[v], dy[v], gamma[v], stats).input_grad(sums, stats.rstd, inv_cols, dx);
      store_global_vector(p.dx.template row<T>(row), col, dx);
      partials[v].add_dx(dx);
    }
  }
  if constexpr (Config::kRowsPerBlock > 1) {
    add_block_partials<Config>(p, partials, at);
  } else {
    store_partials<Config>(p, partials, at.lane);
  }
}

/// The unbounded bucket's shared memory past the merge slots (and a cluster's exchange), as the
/// launch's stash bits say: the block's partial sums (fp32), the row's x and dy, and γ, each of
/// the block's columns. Every thread reads back only the columns it wrote, so the stash needs
/// no barrier of its own.
template <class Config>
struct BackwardStash {
  using T = typename Config::Element;
  ColumnSpan span;
  float* partials;  // (planes, plane stride)
  T* x;
  T* dy;
  T* gamma;
  int stash;

  FJ_DEVICE BackwardStash(const LayerNormBackwardParams& p, ColumnSpan span_)
      : span(span_), stash(p.stash) {
    namespace space = layer_norm_space;
    unsigned char* at = dynamic_shared<unsigned char>() + Config::kStashOffset;
    partials = reinterpret_cast<float*>(at);
    if (stash & space::kStashPartials) {
      at += p.planes() * space::partial_plane_bytes(span.stash_cols);
    }
    const int row_bytes = space::round_up16(span.stash_cols * int(sizeof(T)));
    x = reinterpret_cast<T*>(at);
    dy = reinterpret_cast<T*>(at + row_bytes);
    if (stash & space::kStashRows) at += 2 * row_bytes;
    gamma = reinterpret_cast<T*>(at);
  }
  FJ_DEVICE bool holds(int bit) const { return (stash & bit) != 0; }

  /// Adds `add` to sum `which`'s partial at `col` (this thread's own columns: a plain
  /// read-modify-write), in the stash or in the block group's own in the workspace.
  FJ_DEVICE void add_partial(const LayerNormBackwardParams& p, int which, int col,
                             const RowVector<Config>& add) const {
    RowVector<Config> sum;
    if (holds(layer_norm_space::kStashPartials)) {
      load_shared_vector(shared_partial(p, which), span.local(col), sum);
    } else {
      load_global_vector(p.partial(which, row_group_index<Config>()), col, sum);
    }
#pragma unroll
    for (int i = 0; i < Config::kVectorWidth; ++i) sum[i] += add[i];
    store_partial(p, which, col, sum);
  }
  /// Sets sum `which`'s partial at `col`.
  FJ_DEVICE void store_partial(const LayerNormBackwardParams& p, int which, int col,
                               const RowVector<Config>& sum) const {
    if (holds(layer_norm_space::kStashPartials)) {
      return store_shared_vector(shared_partial(p, which), span.local(col), sum);
    }
    store_global_vector(p.partial(which, row_group_index<Config>()), col, sum);
  }
  FJ_DEVICE float* shared_partial(const LayerNormBackwardParams& p, int which) const {
    return partials +
           p.plane_of(which) * (layer_norm_space::partial_plane_bytes(span.stash_cols) / 4);
  }
};

/// The unbounded bucket's first pass over `row`: x and dy read once (into the stash where it
/// holds the rows) and the row's sums of their terms returned; `gamma_at(col, gamma)` gives γ.
/// kBatch vectors' loads of each start before the first is used, so a thread has that many of
/// x and dy in flight (one of each at a time, an SM's 1024 threads had 16 to 32 KB).
template <class Config, class Gamma>
FJ_DEVICE RowSums read_grad_row(const LayerNormBackwardParams& p, index_t row,
                                const BackwardStash<Config>& stash, RowLane at, RowStats stats,
                                const Gamma& gamma_at) {
  using T = typename Config::Element;
  using Raw = RawVector<T, Config::kVectorWidth>;
  constexpr int kBatch = layer_norm_space::kUnboundedLoadsAhead;
  const ColumnSpan span = stash.span;
  RowSums sums = {0.0f, 0.0f};
  for (int first = span.begin + at.lane * Config::kVectorWidth; first < span.end;
       first += kBatch * Config::kRowStep) {
    Raw x_loaded[kBatch] = {}, dy_loaded[kBatch] = {};
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int col = first + b * Config::kRowStep;
      if (col >= span.end) continue;
      load_global_raw(p.x.template row<const T>(row), col, x_loaded[b]);
      load_global_raw(p.dy.template row<const T>(row), col, dy_loaded[b]);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int col = first + b * Config::kRowStep;
      if (col >= span.end) continue;
      RowVector<Config> x, dy, gamma;
      widen(x_loaded[b], x);
      widen(dy_loaded[b], dy);
      if (stash.holds(layer_norm_space::kStashRows)) {
        store_shared_vector(stash.x, span.local(col), x);
        store_shared_vector(stash.dy, span.local(col), dy);
      }
      gamma_at(col, gamma);
      sums = VectorGrad<Config>(x, dy, gamma, stats).add_to(sums);
    }
  }
  return sums;
}

/// The unbounded bucket: one row a block (or a cluster) at a time, x and dy read once into the
/// stash where they fit (else read again for the second pass), γ and the partials kept where
/// they fit. In a cluster each block takes its chunk of the columns and writes its chunk of the
/// cluster's partial; the row's sums cross the cluster.
template <class Config>
FJ_DEVICE void backward_rows_in_shared(const LayerNormBackwardParams& p) {
  namespace space = layer_norm_space;
  using T = typename Config::Element;
  const RowLane at = row_lane<Config>();
  const ColumnSpan span = block_columns<Config>(p.cols);
  const BackwardStash<Config> stash(p, span);
  for_each_vector<Config>(span, at.lane, [&](int col) {
    RowVector<Config> v;
    fill_zero(v);
    for (int which = 0; which < 3; ++which) {
      if (writes_sum(p, which)) stash.store_partial(p, which, col, v);
    }
    if (stash.holds(space::kStashGamma)) {
      load_param<Config>(p.gamma, col, v);
      store_shared_vector(stash.gamma, span.local(col), v);
    }
  });
  auto gamma_at = [&](int col, RowVector<Config>& gamma) {
    if (stash.holds(space::kStashGamma)) {
      return load_shared_vector(stash.gamma, span.local(col), gamma);
    }
    load_param<Config>(p.gamma, col, gamma);
  };
  const float inv_cols = 1.0f / float(p.cols);
  auto add = [](RowSums a, RowSums b) { return add_sums(a, b); };
  int round = 0;  // the cluster's exchanges
  const BlockRows rows = block_rows<Config>(p.rows);
  for (index_t row = rows.begin; row < rows.end; ++row) {
    const RowStats stats = row_stats<Config>(p, row, true);
    RowSums sums = read_grad_row<Config>(p, row, stash, at, stats, gamma_at);
    sums = cluster_allreduce<Config>(row_allreduce<Config>(sums, at, add), round,
                                     add);  // Σ g·x̂, Σ g
    for_each_vector<Config>(span, at.lane, [&](int col) {
      RowVector<Config> x, dy, gamma, dx;
      if (stash.holds(space::kStashRows)) {
        load_shared_vector(stash.x, span.local(col), x);
        load_shared_vector(stash.dy, span.local(col), dy);
      } else {
        load_global_vector(p.x.template row<const T>(row), col, x);
        load_global_vector(p.dy.template row<const T>(row), col, dy);
      }
      gamma_at(col, gamma);
      const VectorGrad<Config> grad(x, dy, gamma, stats);
      grad.input_grad(sums, stats.rstd, inv_cols, dx);
      store_global_vector(p.dx.template row<T>(row), col, dx);
      VectorPartials<Config> terms;
      terms.zero();
      terms.add(grad);
      terms.add_dx(dx);
      for (int which = 0; which < 3; ++which) {
        if (writes_sum(p, which)) stash.add_partial(p, which, col, terms.sum[which]);
      }
    });
  }
  if constexpr (Config::kClusterBlocks > 1) cluster_sync();  // peers' last reads of our slot
  if (!stash.holds(space::kStashPartials)) return;
  for_each_vector<Config>(span, at.lane, [&](int col) {  // the block's partials, written once
    for (int which = 0; which < 3; ++which) {
      if (!writes_sum(p, which)) continue;
      RowVector<Config> sum;
      load_shared_vector(stash.shared_partial(p, which), span.local(col), sum);
      store_global_vector(p.partial(which, row_group_index<Config>()), col, sum);
    }
  });
}

/// Grid: the host's number of blocks (one partial each), each a contiguous run of the rows;
/// block kBlockThreads; dynamic shared memory: the merge slots and the partials of a block's
/// rows, or for the unbounded bucket the stash the host chose.
template <class Config>
FJ_GLOBAL void __launch_bounds__(Config::kBlockThreads, Config::kBackwardBlocksPerSm)
    layer_norm_backward_kernel(const LayerNormBackwardParams p) {
  if constexpr (Config::kCached) {
    backward_rows_in_registers<Config>(p);
  } else {
    backward_rows_in_shared<Config>(p);
  }
}

#if defined(FJ_HAS_CLUSTERS)
/// layer_norm_backward_kernel's unbounded bucket with each row split over a cluster of
/// Config::kClusterBlocks blocks (sm_90a); one partial per cluster. Grid: a multiple of the
/// cluster size.
template <class Config>
FJ_GLOBAL void __cluster_dims__(Config::kClusterBlocks, 1, 1)
    __launch_bounds__(Config::kBlockThreads, Config::kBackwardBlocksPerSm)
        layer_norm_backward_cluster_kernel(const LayerNormBackwardParams p) {
  static_assert(Config::kClusterBlocks > 1 && !Config::kCached, "the unbounded bucket's split");
  backward_rows_in_shared<Config>(p);
}
#endif

/// dγ, dβ, dbias: the row blocks' partials summed per column in a fixed order, so every run
/// gives the same bits. A block takes kParamGradCols neighbouring columns (each partial's
/// segment one coalesced warp load) and kParamGradSlices threads per column, thread s summing
/// partials s, s + kParamGradSlices, ...; the slices' sums then add in slice order through
/// shared memory. One thread per column walking every partial left a narrow row (768 columns:
/// 3 blocks) waiting on hundreds of dependent-latency loads.
template <typename Element>
FJ_GLOBAL void __launch_bounds__(layer_norm_space::kParamGradThreads)
    layer_norm_param_grad_kernel(const LayerNormBackwardParams p) {
  constexpr int kCols = layer_norm_space::kParamGradCols;
  constexpr int kSlices = layer_norm_space::kParamGradSlices;
  float* slice_sums = dynamic_shared<float>();  // [kSlices][kCols]
  const int lane = int(threadIdx.x) % kCols, slice = int(threadIdx.x) / kCols;
  const int col = int(blockIdx.x) * kCols + lane;
  void* outputs[3] = {p.dgamma, p.dbeta, p.dbias};
  for (int which = 0; which < 3; ++which) {
    if (!writes_sum(p, which)) continue;  // the same for every thread: the barriers are safe
    float sum = 0.0f;
    if (col < p.cols) {
      for (int block = slice; block < p.blocks; block += kSlices) {
        sum += load_global(p.partial(which, block), col);
      }
    }
    store_shared(slice_sums, slice * kCols + lane, sum);
    __syncthreads();
    if (slice == 0 && col < p.cols) {
      float total = 0.0f;
      for (int s = 0; s < kSlices; ++s) total += load_shared(slice_sums, s * kCols + lane);
      store_global(static_cast<Element*>(outputs[which]), col, total);
    }
    __syncthreads();  // every read of slice_sums done before the next plane writes it
  }
}

}  // namespace flashjit
