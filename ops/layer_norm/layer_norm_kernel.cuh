#pragma once
// Layer norm forward, y = (x − μ)/√(σ² + ε) · γ + β per row (σ² biased, over the row's cols,
// as torch.nn.functional.layer_norm), and RMS norm, y = x/√(mean(x²) + ε) · γ. Optionally
// fused with the add before it, x = input + bias + residual, written out as the next block's
// residual. A bandwidth kernel: each element of x is read once with 16-byte vectors and kept
// on chip (registers for the bounded buckets, shared memory for the unbounded one), μ and σ²
// come from two passes over what is kept (Σx, then Σ(x − μ)², which keeps the digits of a row
// with a large mean without any division per element), and each block takes a contiguous run
// of rows with γ and β loaded once. Writes μ and rstd = 1/√(σ² + ε) in fp32 for the backward.
#include "layer_norm/layer_norm_params.cuh"
#include "layer_norm/layer_norm_row.cuh"

namespace flashjit {

/// Zeros a vector (a column past the row, or a tensor the call does not have).
template <int W>
FJ_DEVICE void fill_zero(float (&v)[W]) {
#pragma unroll
  for (int i = 0; i < W; ++i) v[i] = 0.0f;
}

/// The vector of [cols] tensor `vector` at `col`; zeros when the call has none.
template <class Config>
FJ_DEVICE void load_param(const void* vector, int col, RowVector<Config>& out) {
  using T = typename Config::Element;
  if (vector == nullptr) return fill_zero(out);
  load_global_vector(static_cast<const T*>(vector), col, out);
}

/// x = input + bias + residual rounded to the element type: the fused sum, `x` holding the
/// input.
template <class Config>
FJ_DEVICE void add_fused(const RowVector<Config>& bias, const RowVector<Config>& residual,
                         RowVector<Config>& x) {
  using T = typename Config::Element;
#pragma unroll
  for (int i = 0; i < Config::kVectorWidth; ++i) {
    x[i] = to_float(from_float<T>(x[i] + bias[i] + residual[i]));
  }
}

/// x's vector at one column of a row as loaded and not yet used: the input's and, when the call
/// fuses one, the residual's, as memory holds them, so their loads stay in flight until x is
/// needed (widening them at the load would wait for it there).
template <class Config>
struct LoadedX {
  using Raw = RawVector<typename Config::Element, Config::kVectorWidth>;
  Raw input;
  Raw residual;
  static constexpr int kBytes = Config::kVectorWidth * int(sizeof(typename Config::Element));
  // The input's registers: a 16-byte vector in four, a scalar in one of its own.
  static constexpr int kRegisters = Raw::kWords;
};

/// Starts the loads of x's vector at `col` of `row`.
template <class Config>
FJ_DEVICE void start_x(const LayerNormParams& p, index_t row, int col, LoadedX<Config>& out) {
  using T = typename Config::Element;
  load_global_raw(p.input.template row<const T>(row), col, out.input);
  if (p.residual.present()) {
    load_global_raw(p.residual.template row<const T>(row), col, out.residual);
  }
}

/// x from its loads: the input, or input + bias + residual rounded to the element type when
/// fused (the sum the forward writes and the backward reads back, so both see the same x).
/// `bias` is the bias's vector at x's column (zeros without one).
template <class Config>
FJ_DEVICE void finish_x(const LayerNormParams& p, const LoadedX<Config>& loaded,
                        const RowVector<Config>& bias, RowVector<Config>& x) {
  widen(loaded.input, x);
  if (!p.fused()) return;
  RowVector<Config> residual;
  fill_zero(residual);
  if (p.residual.present()) widen(loaded.residual, residual);
  add_fused<Config>(bias, residual, x);
}

/// x's vector at `col` of `row`, loaded and finished.
template <class Config>
FJ_DEVICE void load_x(const LayerNormParams& p, index_t row, int col, const RowVector<Config>& bias,
                      RowVector<Config>& x) {
  LoadedX<Config> loaded;
  start_x<Config>(p, row, col, loaded);
  finish_x<Config>(p, loaded, bias, x);
}

/// x's vector at `col` of `row` out as the fused sum, when the call asks for it.
template <class Config>
FJ_DEVICE void write_sum(const LayerNormParams& p, index_t row, int col,
                         const RowVector<Config>& x) {
  if (p.fused() && p.sum.present()) {
    store_global_vector(p.sum.template row<typename Config::Element>(row), col, x);
  }
}

template <int W>
FJ_DEVICE float vector_sum(const float (&v)[W], float sum) {
#pragma unroll
  for (int i = 0; i < W; ++i) sum += v[i];
  return sum;
}

/// Σ (v − mean)² added to `sum`.
template <int W>
FJ_DEVICE float vector_squares(const float (&v)[W], float mean, float sum) {
#pragma unroll
  for (int i = 0; i < W; ++i) sum = fma_rn(v[i] - mean, v[i] - mean, sum);
  return sum;
}

/// A row's normalization: x̂ = (x − μ)·rstd (μ = 0 for RMS norm).
struct RowNorm {
  float mean;
  float rstd;
};

/// rstd from the row's Σ(x − μ)² (Σx² for RMS norm); the row's lane 0 writes μ and rstd.
template <class Config>
FJ_DEVICE RowNorm finish_row(const LayerNormParams& p, index_t row, float mean, float squares,
                             float inv_cols, bool writer) {
  const RowNorm norm = {mean, 1.0f / sqrt_rn(squares * inv_cols + p.epsilon)};
  if (writer && p.mean.present()) store_global(p.mean.at(row), 0, norm.mean);
  if (writer && p.rstd.present()) store_global(p.rstd.at(row), 0, norm.rstd);
  return norm;
}

/// y = x̂·γ + β (β zeros for RMS norm), written at `col` of `row`.
template <class Config>
FJ_DEVICE void store_y(const LayerNormParams& p, index_t row, int col, const RowVector<Config>& x,
                       RowNorm norm, const RowVector<Config>& gamma,
                       const RowVector<Config>& beta) {
  RowVector<Config> y;
#pragma unroll
  for (int i = 0; i < Config::kVectorWidth; ++i) {
    y[i] = fma_rn((x[i] - norm.mean) * norm.rstd, gamma[i], beta[i]);
  }
  store_global_vector(p.y.template row<typename Config::Element>(row), col, y);
}

/// This thread's vectors of the [cols] tensor `vector` (zeros past the row or without one).
/// A block of several row slots reads them once: slot 0 from global memory into the shared
/// memory past the merge slots, every slot from there (one barrier).
template <class Config>
FJ_DEVICE void load_block_params(int cols, const void* vector, RowLane at,
                                 RowVector<Config> (&out)[Config::kVectorsPerThread]) {
  using T = typename Config::Element;
  T* shared = reinterpret_cast<T*>(dynamic_shared<unsigned char>() +
                                   layer_norm_space::merge_bytes(Config::kThreadsPerRow));
#pragma unroll
  for (int v = 0; v < Config::kVectorsPerThread; ++v) {
    const int col = vector_column<Config>(v, at.lane);
    load_param<Config>(
        col < cols && (Config::kRowsPerBlock == 1 || at.row_in_block == 0) ? vector : nullptr, col,
        out[v]);
    if (Config::kRowsPerBlock > 1 && at.row_in_block == 0 && vector != nullptr) {
      store_shared_vector(shared, col, out[v]);
    }
  }
  if constexpr (Config::kRowsPerBlock > 1) {
    if (vector == nullptr) return;  // the same for every thread: no barrier skipped by some
    __syncthreads();
#pragma unroll
    for (int v = 0; v < Config::kVectorsPerThread; ++v) {
      const int col = vector_column<Config>(v, at.lane);
      if (col < cols) load_shared_vector(shared, col, out[v]);
    }
    __syncthreads();  // every slot has its copy before the next vector overwrites it
  }
}

/// A row slot's share of one group's x as loaded and not yet used (LoadedX).
template <class Config>
struct LoadedGroup {
  LoadedX<Config> x[Config::kVectorsPerThread];
  static constexpr int kBytes = LoadedX<Config>::kBytes * Config::kVectorsPerThread;
  static constexpr int kRegisters = LoadedX<Config>::kRegisters * Config::kVectorsPerThread;
};

/// Starts the loads of the row slot's x of group `group` (nothing past the rows and the row's
/// columns).
template <class Config>
FJ_DEVICE void load_group(const LayerNormParams& p, index_t group, RowLane at,
                          LoadedGroup<Config>& out) {
  const index_t row = group * Config::kRowsPerBlock + at.row_in_block;
  if (row >= p.rows) return;
#pragma unroll
  for (int v = 0; v < Config::kVectorsPerThread; ++v) {
    const int col = vector_column<Config>(v, at.lane);
    if (col < p.cols) start_x<Config>(p, row, col, out.x[v]);
  }
}

/// The row slot's x of group `group` from its loads (finish_x); zeros past the rows and the
/// columns.
template <class Config>
FJ_DEVICE void group_x(const LayerNormParams& p, index_t group, RowLane at,
                       const LoadedGroup<Config>& loaded,
                       const RowVector<Config> (&bias)[Config::kVectorsPerThread],
                       RowVector<Config> (&x)[Config::kVectorsPerThread]) {
  const index_t row = group * Config::kRowsPerBlock + at.row_in_block;
#pragma unroll
  for (int v = 0; v < Config::kVectorsPerThread; ++v) {
    fill_zero(x[v]);
    if (row < p.rows && vector_column<Config>(v, at.lane) < p.cols) {
      finish_x<Config>(p, loaded.x[v], bias[v], x[v]);
    }
  }
}

/// The row slot's x of group `group` loaded and finished one vector after the other (zeros
/// past the rows and the columns): where no group fits in registers ahead of its use.
template <class Config>
FJ_DEVICE void load_group_now(const LayerNormParams& p, index_t group, RowLane at,
                              const RowVector<Config> (&bias)[Config::kVectorsPerThread],
                              RowVector<Config> (&x)[Config::kVectorsPerThread]) {
  const index_t row = group * Config::kRowsPerBlock + at.row_in_block;
#pragma unroll
  for (int v = 0; v < Config::kVectorsPerThread; ++v) {
    const int col = vector_column<Config>(v, at.lane);
    fill_zero(x[v]);
    if (row < p.rows && col < p.cols) load_x<Config>(p, row, col, bias[v], x[v]);
  }
}

/// The bounded buckets: the row, γ, β and the bias in registers, kVectorsPerThread vectors each.
/// The next kAhead groups' x load while this one's sums, barriers and stores run, so an SM keeps
/// layer_norm_space::kBytesInFlight bytes in flight through its rows (an H200 ran
/// 32768 × 4096 bf16 at 1.3 TB/s, torch's kernel at 2.6, with one row's 16 bytes a thread).
template <class Config>
FJ_DEVICE void normalize_rows_in_registers(const LayerNormParams& p) {
  constexpr int kVectors = Config::kVectorsPerThread;
  constexpr int kAhead = layer_norm_space::row_groups_ahead(
      Config::kBlockThreads * Config::kForwardBlocksPerSm, kVectors * Config::kVectorWidth, kVectors,
      layer_norm_space::kForwardRegistersPerValue, LoadedGroup<Config>::kBytes,
      2 * LoadedGroup<Config>::kRegisters);
  const RowLane at = row_lane<Config>();
  RowVector<Config> gamma[kVectors], beta[kVectors], bias[kVectors];  // loaded once
  load_block_params<Config>(p.cols, p.gamma, at, gamma);
  load_block_params<Config>(p.cols, p.beta, at, beta);
  load_block_params<Config>(p.cols, p.bias, at, bias);
  const float inv_cols = 1.0f / float(p.cols);
  const BlockRows rows = block_rows<Config>(p.rows);
  LoadedGroup<Config> ahead[kAhead > 0 ? kAhead : 1] = {};  // groups group .. group + kAhead - 1
#pragma unroll
  for (int k = 0; k < kAhead; ++k) {
    if (rows.begin + k < rows.end) load_group<Config>(p, rows.begin + k, at, ahead[k]);
  }
  for (index_t group = rows.begin; group < rows.end; ++group) {
    const index_t row = group * Config::kRowsPerBlock + at.row_in_block;
    const bool active = row < p.rows;  // idle threads still reach the block barriers
    RowVector<Config> x[kVectors];
    if constexpr (kAhead == 0) {
      load_group_now<Config>(p, group, at, bias, x);
    } else {
      group_x<Config>(p, group, at, ahead[0], bias, x);
#pragma unroll
      for (int k = 0; k + 1 < kAhead; ++k) ahead[k] = ahead[k + 1];
      if (group + kAhead < rows.end) load_group<Config>(p, group + kAhead, at, ahead[kAhead - 1]);
    }
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kVectors; ++v) sum = vector_sum(x[v], sum);
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      const int col = vector_column<Config>(v, at.lane);
      if (active && col < p.cols) write_sum<Config>(p, row, col, x[v]);
    }
    const float mean = Config::kRms ? 0.0f : row_sum<Config>(sum, at) * inv_cols;  // μ
    float squares = 0.0f;
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      if (vector_column<Config>(v, at.lane) < p.cols) squares = vector_squares(x[v], mean, squares);
    }
    squares = row_sum<Config>(squares, at);  // Σ(x − μ)²
    const RowNorm norm =
        finish_row<Config>(p, row, mean, squares, inv_cols, active && at.lane == 0);
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      const int col = vector_column<Config>(v, at.lane);
      if (active && col < p.cols) store_y<Config>(p, row, col, x[v], norm, gamma[v], beta[v]);
    }
  }
}

/// The unbounded bucket's shared memory past the merge slots (and a cluster's exchange): the
/// block's columns of the row, then of γ, β and the bias (each padded to 16 bytes), as much of
/// it as the launch's stash mode says. Every thread reads back only the vectors it wrote, so
/// the stash needs no barrier of its own.
template <class Config>
struct RowStash {
  using T = typename Config::Element;
  T* row;
  ColumnSpan span;
  int stride;  // elements from one stashed vector to the next
  int mode;    // layer_norm_space::Stash

  FJ_DEVICE RowStash(const LayerNormParams& p, ColumnSpan span_)
      : row(reinterpret_cast<T*>(dynamic_shared<unsigned char>() + Config::kStashOffset)),
        span(span_),
        stride(layer_norm_space::round_up16(span_.stash_cols * int(sizeof(T))) / int(sizeof(T))),
        mode(p.stash) {}

  FJ_DEVICE bool holds_row() const { return mode != layer_norm_space::kStashNone; }
  FJ_DEVICE bool holds_vectors() const { return mode == layer_norm_space::kStashRowAndVectors; }
  /// Stashed vector `which` (0 γ, 1 β, 2 bias).
  FJ_DEVICE T* vector(int which) const { return row + (1 + which) * stride; }

  FJ_DEVICE void store_row(int col, const RowVector<Config>& x) const {
    store_shared_vector(row, span.local(col), x);
  }
  FJ_DEVICE void load_row(int col, RowVector<Config>& x) const {
    load_shared_vector(row, span.local(col), x);
  }
  /// Vector `which` at `col`: from the stash, or from global `source`.
  FJ_DEVICE void param(int which, const void* source, int col, RowVector<Config>& out) const {
    if (source != nullptr && holds_vectors()) {
      return load_shared_vector(vector(which), span.local(col), out);
    }
    load_param<Config>(source, col, out);
  }
};

/// The unbounded bucket's first pass over `row`: x read once (the fused sum written out, the
/// row stashed where it fits) and Σx returned. kBatch vectors' loads start before the first is
/// used, so a thread has that many in flight (one at a time, an SM's 1024 threads had 16 KB).
template <class Config>
FJ_DEVICE float read_row(const LayerNormParams& p, index_t row, const RowStash<Config>& stash,
                         RowLane at) {
  constexpr int kBatch = layer_norm_space::kUnboundedLoadsAhead;
  const ColumnSpan span = stash.span;
  float sum = 0.0f;
  for (int first = span.begin + at.lane * Config::kVectorWidth; first < span.end;
       first += kBatch * Config::kRowStep) {
    LoadedX<Config> loaded[kBatch] = {};
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int col = first + b * Config::kRowStep;
      if (col < span.end) start_x<Config>(p, row, col, loaded[b]);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int col = first + b * Config::kRowStep;
      if (col >= span.end) continue;
      RowVector<Config> bias, x;
      stash.param(2, p.bias, col, bias);
      finish_x<Config>(p, loaded[b], bias, x);
      write_sum<Config>(p, row, col, x);
      if (stash.holds_row()) stash.store_row(col, x);
      sum = vector_sum(x, sum);
    }
  }
  return sum;
}

/// The unbounded bucket: one row a block (or a cluster) at a time, read once into the stash
/// (or, where the row does not fit, read again for each pass). In a cluster each block takes
/// its chunk of the columns and the row's sums cross the cluster.
template <class Config>
FJ_DEVICE void normalize_rows_in_shared(const LayerNormParams& p) {
  const RowLane at = row_lane<Config>();
  const ColumnSpan span = block_columns<Config>(p.cols);
  const RowStash<Config> stash(p, span);
  const void* params[3] = {p.gamma, p.beta, p.bias};
  if (stash.holds_vectors()) {  // γ, β and the bias, once for all of the block's rows
    for_each_vector<Config>(span, at.lane, [&](int col) {
      for (int which = 0; which < 3; ++which) {
        if (params[which] == nullptr) continue;
        RowVector<Config> v;
        load_param<Config>(params[which], col, v);
        store_shared_vector(stash.vector(which), span.local(col), v);
      }
    });
  }
  // x's vector at `col`: from the stash, or from global memory once more.
  auto x_at = [&](index_t row, int col, RowVector<Config>& x) {
    if (stash.holds_row()) return stash.load_row(col, x);
    RowVector<Config> bias;
    stash.param(2, p.bias, col, bias);
    load_x<Config>(p, row, col, bias, x);
  };
  const float inv_cols = 1.0f / float(p.cols);
  int round = 0;  // the cluster's exchanges
  const BlockRows rows = block_rows<Config>(p.rows);
  for (index_t row = rows.begin; row < rows.end; ++row) {
    const float sum = read_row<Config>(p, row, stash, at);
    const float mean = Config::kRms ? 0.0f : row_sum<Config>(sum, at, round) * inv_cols;  // μ
    float squares = 0.0f;
    for_each_vector<Config>(span, at.lane, [&](int col) {
      RowVector<Config> x;
      x_at(row, col, x);
      squares = vector_squares(x, mean, squares);
    });
    squares = row_sum<Config>(squares, at, round);  // Σ(x − μ)²
    const RowNorm norm =
        finish_row<Config>(p, row, mean, squares, inv_cols, at.lane == 0 && span.begin == 0);
    for_each_vector<Config>(span, at.lane, [&](int col) {
      RowVector<Config> x, gamma, beta;
      x_at(row, col, x);
      stash.param(0, p.gamma, col, gamma);
      stash.param(1, p.beta, col, beta);
      store_y<Config>(p, row, col, x, norm, gamma, beta);
    });
  }
  if constexpr (Config::kClusterBlocks > 1) cluster_sync();  // peers' last reads of our slot
}

/// Grid: up to the rows' groups of kRowsPerBlock, each block a contiguous run of them (the host
/// sizes it to the GPU); block kBlockThreads; dynamic shared memory: the merge slots, and for
/// the unbounded bucket the stash the host chose.
template <class Config>
FJ_GLOBAL void __launch_bounds__(Config::kBlockThreads, Config::kForwardBlocksPerSm)
    layer_norm_kernel(const LayerNormParams p) {
  if constexpr (Config::kCached) {
    normalize_rows_in_registers<Config>(p);
  } else {
    normalize_rows_in_shared<Config>(p);
  }
}

#if defined(FJ_HAS_CLUSTERS)
/// layer_norm_kernel's unbounded bucket with each row split over a cluster of
/// Config::kClusterBlocks blocks (sm_90a). Grid: a multiple of the cluster size.
template <class Config>
FJ_GLOBAL void __cluster_dims__(Config::kClusterBlocks, 1, 1)
    __launch_bounds__(Config::kBlockThreads, Config::kForwardBlocksPerSm)
        layer_norm_cluster_kernel(const LayerNormParams p) {
  static_assert(Config::kClusterBlocks > 1 && !Config::kCached, "the unbounded bucket's split");
  normalize_rows_in_shared<Config>(p);
}
#endif

}  // namespace flashjit
