#pragma once
// Where a query-major kernel's tiles live in shared memory (the forward's, and the backward dQ
// kernel's), and the cp.async pipeline that streams key and value blocks in ahead of their use.
// With one stage, V_j loads during S = Q K_jᵀ and the softmax, and K_j+1 during O += P V_j; with
// two, K_j+1 and V_j+1 load during the whole of iteration j. Every wait is followed by a block
// barrier, which also tells the loader that all warps are done with the buffer it refills next.
#include "attention/fa2/forward_traits.cuh"
#include "attention/parts/head_tensor.cuh"
#include "tile/e4m3.cuh"
#include "tile/shared_tile.cuh"

namespace flashjit {

/// The pipeline's source of rows for one (batch, head) of dense tensors: evenly spaced rows
/// from a HeadSlice. A source loads the Q tile and key and value blocks (issuing the copies;
/// the pipeline commits and waits). The forward's other layouts have their own
/// (attention/fa2/forward_rows.cuh).
template <class Traits>
struct StridedRows {
  using T = typename Traits::Element;
  static constexpr bool kKvE4m3 = false;  // dense 16-bit K and V
  HeadSlice<T> slice;
  int seqlen_k;
  int value_cols;  // V's head dim: its columns past it load as zeros

  FJ_DEVICE StridedRows(const HeadSlice<T>& slice_, int seqlen_k_, int value_cols_)
      : slice(slice_), seqlen_k(seqlen_k_), value_cols(value_cols_) {}

  template <class Tile>
  FJ_DEVICE void load_queries(Tile q, int rows, int thread) const {
    load_tile_async<Traits::kThreads>(q, slice.q, slice.q_row_stride, rows, Traits::kHeadDim,
                                      thread);
  }
  template <class Tile>
  FJ_DEVICE void load_keys(Tile k, int key0, int thread) const {
    load_tile_async<Traits::kThreads>(k, slice.k + key0 * slice.k_row_stride, slice.k_row_stride,
                                      seqlen_k - key0, Traits::kHeadDim, thread);
  }
  template <class Tile>
  FJ_DEVICE void load_values(Tile v, int key0, int thread) const {
    load_tile_async<Traits::kThreads>(v, slice.v + key0 * slice.v_row_stride, slice.v_row_stride,
                                      seqlen_k - key0, value_cols, thread);
  }
};

/// Whether a kernel's values are its keys' first columns in the same memory (Traits::
/// kValuesInKeys, where the traits have it; MLA's latent cache): then V's blocks are not
/// loaded, the key tile serves as V.
template <class Traits, class = void>
struct ValuesInKeys {
  static constexpr bool value = false;
};
template <class Traits>
struct ValuesInKeys<Traits, decltype(void(Traits::kValuesInKeys))> {
  static constexpr bool value = Traits::kValuesInKeys;
};

template <class Traits, class Rows = StridedRows<Traits>>
struct KeyValuePipeline {
  using T = typename Traits::Element;
  using QTile = smem_tile<T, Traits::kBlockM, Traits::kHeadDimPadded>;
  using KVTile = smem_tile<T, Traits::kBlockN, Traits::kHeadDimPadded>;
  static constexpr int kStages = Traits::kStages;
  /// V is the key tile's first columns: only K's blocks load, through two stages (K_j+1 loads
  /// during the whole of iteration j; with one, nothing could load under O += P V_j).
  static constexpr bool kValuesInKeys = ValuesInKeys<Traits>::value;
  /// Shared memory the pipeline carves from the start of the dynamic buffer.
  static constexpr int kBytes = QTile::kBytes + (kValuesInKeys ? 1 : 2) * kStages * KVTile::kBytes;
  static_assert(kBytes <= Traits::kSharedBytes,
                "the host's shared_bytes() must cover the tiles carved here");
  /// An fp8 cache (the source's kKvE4m3): K's and V's blocks land as bytes in a two-slot ring
  /// (StagingTile) and each thread converts its own chunks into the one 16-bit tile the
  /// products read, between its wait and the barrier. The ring and the tile take the bytes of
  /// the two 16-bit slots they replace.
  static constexpr bool kKvE4m3 = Rows::kKvE4m3;
  using StagingTile = e4m3_tile<Traits::kBlockN, Traits::kHeadDimPadded>;
  static_assert(!kKvE4m3 || (kStages == 2 && 2 * StagingTile::kBytes <= KVTile::kBytes),
                "an fp8 cache streams through two stages");
  static_assert(!kValuesInKeys || (kStages == 2 && !kKvE4m3),
                "values in the keys stream through two 16-bit stages");

  QTile q;        // (kBlockM, kHeadDimPadded); holds O at the end
  KVTile k0, v0;  // (kBlockN, kHeadDimPadded): slot 0 of the K and V ring buffers; slot s is
                  // s tiles further (computed, not indexed, so it stays in registers). With an
                  // fp8 cache, the tiles the products read.
  StagingTile k_staging0, v_staging0;  // an fp8 cache's ring slot 0, after k0 and v0
  Rows source;
  int end_block;
  int thread;

  FJ_DEVICE KeyValuePipeline(const Rows& source_, int end_block_)
      : source(source_), end_block(end_block_), thread(threadIdx.x) {
    unsigned char* base = dynamic_shared<unsigned char>();
    q = carve_tile<QTile>(base);
    k0 = carve_tile<KVTile>(base);
    k_staging0 = {base};
    base += (kStages - 1) * KVTile::kBytes;
    if constexpr (kValuesInKeys) {
      v0 = k0;
    } else {
      v0 = carve_tile<KVTile>(base);
    }
    v_staging0 = {base};
  }

  /// Starts loading the query tile (`rows` valid rows) and the first key (and value) block.
  FJ_DEVICE void start(int rows, int first_block) {
    source.load_queries(q, rows, thread);
    load_keys(first_block);
    if constexpr (kStages == 2 && !kValuesInKeys) load_values(first_block);
  }

  /// Waits until key block `block` is in shared memory for every thread and starts the loads
  /// this iteration overlaps; returns the key tile.
  FJ_DEVICE KVTile await_keys(int block) {
    const bool has_next = block + 1 < end_block;
    if constexpr (kValuesInKeys) {
      cp_async_wait<0>();  // K_j, the only block in flight
      __syncthreads();     // also: every warp is done with K_j-1, which was V_j-1 too
      if (has_next) load_keys(block + 1);
    } else if constexpr (kStages == 1) {
      cp_async_wait<0>();  // K_j
      __syncthreads();     // also: every warp is done reading V_j-1
      load_values(block);
    } else {
      cp_async_wait<1>();  // K_j; V_j may still be in flight
      if constexpr (kKvE4m3)
        convert_e4m3_tile<Traits::kThreads>(staged(k_staging0, block), k0, thread);
      __syncthreads();  // also: every warp is done with K_j-1 and V_j-1
      if (has_next) {
        load_keys(block + 1);
        load_values(block + 1);
      }
    }
    return kKvE4m3 ? k0 : slot(k0, block);
  }

  /// Waits until value block `block` is in shared memory for every thread; returns the tile.
  FJ_DEVICE KVTile await_values(int block) {
    if constexpr (kValuesInKeys) return slot(k0, block);  // arrived with the keys (await_keys)
    const bool has_next = block + 1 < end_block;
    if constexpr (kStages == 1) {
      cp_async_wait<0>();  // V_j
      __syncthreads();     // also: every warp is done reading K_j
      if (has_next) load_keys(block + 1);
    } else {
      if (has_next) {
        cp_async_wait<2>();  // V_j; K_j+1 and V_j+1 may still be in flight
      } else {
        cp_async_wait<0>();
      }
      // (The 16-bit V tile was last read by O += P V_j-1, before await_keys's barrier.)
      if constexpr (kKvE4m3)
        convert_e4m3_tile<Traits::kThreads>(staged(v_staging0, block), v0, thread);
      __syncthreads();
    }
    return kKvE4m3 ? v0 : slot(v0, block);
  }

 private:
  /// The ring-buffer slot of key block `block` in the buffer starting at `first`.
  FJ_DEVICE static KVTile slot(KVTile first, int block) {
    return {first.data + block % kStages * (KVTile::kBytes / 2)};
  }

  /// An fp8 cache's ring slot of key block `block`.
  FJ_DEVICE static StagingTile staged(StagingTile first, int block) {
    return {first.data + block % 2 * StagingTile::kBytes};
  }

  FJ_DEVICE void load_keys(int block) {
    if constexpr (kKvE4m3) {
      source.load_keys(staged(k_staging0, block), block * Traits::kBlockN, thread);
    } else {
      source.load_keys(slot(k0, block), block * Traits::kBlockN, thread);
    }
    cp_async_commit();
  }
  FJ_DEVICE void load_values(int block) {
    if constexpr (kKvE4m3) {
      source.load_values(staged(v_staging0, block), block * Traits::kBlockN, thread);
    } else {
      source.load_values(slot(v0, block), block * Traits::kBlockN, thread);
    }
    cp_async_commit();
  }
};

}  // namespace flashjit
