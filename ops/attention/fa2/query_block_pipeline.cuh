#pragma once
// Where the key-major dK/dV kernel's tiles live in shared memory, and the cp.async pipeline that
// streams the query blocks past its keys: each step is one query block (Q, dO) of one of the
// query heads sharing the CTA's key/value head, in order head by head. With two stages, step
// i + 1 loads during the whole of step i; with one, after it. Every wait is followed by a block
// barrier, which also tells the loader that all warps are done with the buffer it refills.
#include "attention/parts/backward_params.cuh"
#include "attention/parts/key_window.cuh"
#include "tile/fragment_store.cuh"
#include "tile/shared_tile.cuh"

namespace flashjit {

/// One step's query block: rows [row0, row0 + rows) of query head `head`, in shared memory.
template <class Traits>
struct QueryBlock {
  using QueryTile = smem_tile<typename Traits::Element, Traits::kBlockM, Traits::kHeadDimPadded>;
  int head;
  int row0;
  int rows;        // valid rows; the tiles are zero past them
  QueryTile q;     // (kBlockM, d)
  QueryTile dout;  // (kBlockM, d): zero past head_dim_v
};

template <class Traits>
struct QueryBlockPipeline {
  using T = typename Traits::Element;
  using KeyTile = smem_tile<T, Traits::kBlockN, Traits::kHeadDimPadded>;
  using QueryTile = typename QueryBlock<Traits>::QueryTile;
  using ScoreTile = smem_tile<T, Traits::kBlockN, Traits::kBlockM>;
  static constexpr int kStages = Traits::kStages;
  /// Shared memory the tiles take from the start of the dynamic buffer.
  static constexpr int kBytes =
      2 * KeyTile::kBytes + 2 * kStages * QueryTile::kBytes + 2 * ScoreTile::kBytes;
  static_assert(kBytes <= Traits::kSharedBytes,
                "the host's shared bytes must cover the tiles carved here");

  KeyTile k, v;         // (kBlockN, d): the CTA's keys and values (zero past head_dim_v); staging
                        // for dK, dV at the end
  ScoreTile p_t, ds_t;  // (kBlockN, kBlockM): a step's Pᵀ and dSᵀ, shared between warps
  QueryTile q0, dout0;  // (kBlockM, d): slot 0 of the Q and dO ring buffers

  FJ_DEVICE QueryBlockPipeline(const AttentionBackwardParams& params, int batch, int kv_head,
                               BlockRange blocks)
      : q_(params.q),
        dout_(params.dout),
        value_cols_(params.head_dim_v),
        seqlen_q_(params.seqlen_q),
        heads_per_kv_(params.heads_per_kv),
        batch_(batch),
        kv_head_(kv_head),
        blocks_(blocks) {
    unsigned char* base = dynamic_shared<unsigned char>();
    k = carve_tile<KeyTile>(base);
    v = carve_tile<KeyTile>(base);
    p_t = carve_tile<ScoreTile>(base);
    ds_t = carve_tile<ScoreTile>(base);
    q0 = carve_tile<QueryTile>(base);
    base += (kStages - 1) * QueryTile::kBytes;
    dout0 = carve_tile<QueryTile>(base);
  }

  /// Steps of the loop: every visible query block of every query head sharing the keys.
  FJ_DEVICE int steps() const {
    return blocks_.empty() ? 0 : heads_per_kv_ * (blocks_.end - blocks_.begin);
  }

  /// Starts loading the CTA's `keys` valid key and value rows from `key0`, and step 0.
  FJ_DEVICE void start(const AttentionBackwardParams& params, int key0, int keys) {
    load_tile_async<Traits::kThreads>(k, params.k.rows<const T>(batch_, kv_head_, key0),
                                      params.k.row_stride, keys, Traits::kHeadDim, threadIdx.x);
    load_tile_async<Traits::kThreads>(v, params.v.rows<const T>(batch_, kv_head_, key0),
                                      params.v.row_stride, keys, value_cols_, threadIdx.x);
    load(0);  // joins the keys' commit group
  }

  /// Waits until step `step`'s block is in shared memory for every thread (and every warp is
  /// done with the step before), starts the next step's loads with two stages; returns it.
  FJ_DEVICE QueryBlock<Traits> await(int step) {
    cp_async_wait<0>();
    __syncthreads();
    if (kStages == 2 && step + 1 < steps()) load(step + 1);
    return block(step);
  }

  /// Writes the CTA's finished dK and dV (this warp's (keys, d) blocks at `grid`) to the `keys`
  /// rows from `key0` of `dk_out` and `dv_out`, staged through the K and V tiles once every
  /// warp is done reading them, so that global writes are whole 16-byte chunks.
  template <class Grid, int Rows, int Cols>
  FJ_DEVICE void store_key_gradients(const acc_tile<Rows, Cols>& dk, const acc_tile<Rows, Cols>& dv,
                                     const HeadTensor& dk_out, const HeadTensor& dv_out, int key0,
                                     int keys, const Grid& grid, int lane) {
    __syncthreads();
    store_fragments(dk, k, grid.row0, grid.col0, lane);
    store_fragments(dv, v, grid.row0, grid.col0, lane);
    __syncthreads();
    store_rows_from_shared<Traits::kBlockN, Traits::kHeadDim, Traits::kThreads>(
        dk_out.rows<T>(batch_, kv_head_, key0), dk_out.row_stride, k, 0, keys, threadIdx.x);
    store_rows_from_shared<Traits::kBlockN, Traits::kHeadDim, Traits::kThreads>(
        dv_out.rows<T>(batch_, kv_head_, key0), dv_out.row_stride, v, 0, keys, threadIdx.x,
        value_cols_);
  }

  /// Ends step `step`: with one stage, every warp is done with its buffers, and the next step
  /// loads into them.
  FJ_DEVICE void release(int step) {
    if (kStages == 1 && step + 1 < steps()) {
      __syncthreads();
      load(step + 1);
    }
  }

 private:
  FJ_DEVICE QueryBlock<Traits> block(int step) const {
    const int blocks = blocks_.end - blocks_.begin;
    const int row0 = (blocks_.begin + step % blocks) * Traits::kBlockM;
    const int offset = step % kStages * (QueryTile::kBytes / 2);  // the ring-buffer slot
    return {kv_head_ * heads_per_kv_ + step / blocks,
            row0,
            min_int(Traits::kBlockM, seqlen_q_ - row0),
            {q0.data + offset},
            {dout0.data + offset}};
  }

  FJ_DEVICE void load(int step) {
    const QueryBlock<Traits> b = block(step);
    load_tile_async<Traits::kThreads>(b.q, q_.rows<const T>(batch_, b.head, b.row0), q_.row_stride,
                                      b.rows, Traits::kHeadDim, threadIdx.x);
    load_tile_async<Traits::kThreads>(b.dout, dout_.rows<const T>(batch_, b.head, b.row0),
                                      dout_.row_stride, b.rows, value_cols_, threadIdx.x);
    cp_async_commit();
  }

  HeadTensor q_, dout_;
  int value_cols_;  // head_dim_v
  int seqlen_q_;
  int heads_per_kv_;
  int batch_;
  int kv_head_;
  BlockRange blocks_;
};

}  // namespace flashjit
