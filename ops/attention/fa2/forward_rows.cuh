#pragma once
// Where the mma.sync forward's tiles come from on the inference layouts: ForwardRows loads a
// ForwardBlock's query rows and key/value blocks (packed heads, pages, an fp8 cache) into the
// pipeline's tiles, and store_forward_outputs writes its finished rows (O and LSE, or split-KV's
// fp32 partials).
#include "attention/fa2/key_value_pipeline.cuh"
#include "attention/parts/epilogue.cuh"
#include "attention/parts/forward_block.cuh"
#include "tile/e4m3.cuh"

namespace flashjit {

/// The pipeline's row source for a ForwardBlock of any layout but the dense one (which takes
/// StridedRows): every row's address comes from the block, so packed heads and pages cost an
/// index computation per 16-byte chunk.
template <class Traits>
struct ForwardRows {
  using T = typename Traits::Element;
  /// K and V arrive as fp8 bytes (the pipeline converts them; tile/e4m3.cuh).
  static constexpr bool kKvE4m3 = Traits::Layout::kKvE4m3;
  using KeyElement = select_type_t<kKvE4m3, unsigned char, T>;
  ForwardBlock<Traits> block;
  HeadTensor q, k, v;
  SequenceIndex sequences;
  int value_cols;  // V's head dim: its columns past it load as zeros

  template <class Tile>
  FJ_DEVICE void load_queries(Tile tile, int rows, int thread) const {
    load_tile_rows_async<Traits::kThreads>(
        tile, [&](int r) { return block.template query_row<const T>(q, r); },
        static_cast<const T*>(q.data), rows, Traits::kHeadDim, thread);
  }
  /// Key (value) block key0 into `tile`: a 16-bit tile, or an fp8 cache's e4m3_tile.
  template <class Tile>
  FJ_DEVICE void load_keys(Tile tile, int key0, int thread) const {
    load_key_rows(tile, k, key0, Traits::kHeadDim, thread);
  }
  template <class Tile>
  FJ_DEVICE void load_values(Tile tile, int key0, int thread) const {
    load_key_rows(tile, v, key0, value_cols, thread);
  }

 private:
  /// Elements of the cache in one 16-byte chunk.
  static constexpr int kChunk = 16 / int(sizeof(KeyElement));

  template <class Tile>
  FJ_DEVICE void load_key_rows(Tile tile, const HeadTensor& t, int key0, int cols,
                               int thread) const {
    const auto row_at = [&](int r) {
      return block.template key_row<KeyElement>(t, sequences, key0 + r);
    };
    const auto* zero_source = static_cast<const KeyElement*>(t.data);
    if constexpr (Traits::Layout::kPaged && shares_rows<Tile>()) {
      load_page_rows(tile, t, key0, cols, thread);
    } else if constexpr (Traits::Layout::kPaged && Tile::kCols / kChunk > kWarpSize) {
      load_wide_page_rows(tile, t, key0, cols, thread);
    } else if constexpr (kKvE4m3) {
      load_e4m3_rows_async<Traits::kThreads>(tile, row_at, zero_source, block.seqlen_k - key0, cols,
                                             thread);
    } else {
      load_tile_rows_async<Traits::kThreads>(tile, row_at, zero_source, block.seqlen_k - key0, cols,
                                             thread);
    }
  }

  /// Whether the lanes of a warp split whole rows among them (a power-of-two count of chunks
  /// per row, at most a warp) with the same number of rows each: then they can share a row's
  /// page through a shuffle.
  template <class Tile>
  static constexpr bool shares_rows() {
    constexpr int kChunksPerRow = Tile::kCols / kChunk;
    return kChunksPerRow <= kWarpSize && kWarpSize % kChunksPerRow == 0 &&
           Tile::kRows % (Traits::kThreads / kChunksPerRow) == 0;
  }

  /// The page of tile row row_of(lane) for lane `lane` (0 past the sequence's keys or for
  /// lanes past `count`): a warp's rows' page-table entries in one load a lane, issued together,
  /// where looking each row's up in turn would put a dependent global load before every row's
  /// copies. A row's lanes then take its page with shuffle_from.
  template <class RowOf>
  FJ_DEVICE int warp_pages(RowOf row_of, int count, int key0, int lane) const {
    const int row = row_of(lane);
    if (lane >= count || row >= block.seqlen_k - key0) return 0;
    const int position = block.paged_position(key0 + row);
    return load_global_index(sequences.page_table,
                             block.page_table_row(sequences) + position / sequences.page_size);
  }

  /// Paged K or V with rows of more chunks than a warp has lanes (head dims past 256): warp w
  /// takes rows w, w + warps, ..., their pages looked up together (warp_pages), and copies each
  /// row with all of its lanes.
  template <class Tile>
  FJ_DEVICE void load_wide_page_rows(Tile tile, const HeadTensor& t, int key0, int cols,
                                     int thread) const {
    constexpr int kChunksPerRow = Tile::kCols / kChunk;
    constexpr int kWarps = Traits::kThreads / kWarpSize;
    constexpr int kRowsPerWarp = (Tile::kRows + kWarps - 1) / kWarps;
    static_assert(kRowsPerWarp <= kWarpSize, "a warp's rows' pages are one a lane");
    const int lane = thread % kWarpSize, warp = thread / kWarpSize;
    const int rows_valid = block.seqlen_k - key0;
    const auto* zero_source = static_cast<const KeyElement*>(t.data);
    const int pages =
        warp_pages([&](int j) { return warp + j * kWarps; }, kRowsPerWarp, key0, lane);
#pragma unroll 1
    for (int j = 0; j < kRowsPerWarp; ++j) {
      const int row = warp + j * kWarps;
      if (row >= Tile::kRows) break;  // (the same for the whole warp)
      const int position = block.paged_position(key0 + row);
      const int page = shuffle_from(pages, j);
      const KeyElement* src =
          t.rows<const KeyElement>(page, block.kv_head, position % sequences.page_size);
#pragma unroll 1
      for (int col = lane * kChunk; col < kChunksPerRow * kChunk; col += kWarpSize * kChunk) {
        const bool valid = row < rows_valid && col < cols;
        cp_async_16(tile.at(row, col), valid ? src + col : zero_source, valid);
      }
    }
  }

  /// Paged K or V: each lane copies one 16-byte column of a row at a time (chunk c of the tile
  /// is thread c % kThreads's, as in load_tile_rows_async), so a warp covers 32 / chunks-a-row
  /// rows a step; the pages of all the rows a warp will copy are looked up together first
  /// (warp_pages), each row's lanes taking its page from the lane that read it.
  template <class Tile>
  FJ_DEVICE void load_page_rows(Tile tile, const HeadTensor& t, int key0, int cols,
                                int thread) const {
    constexpr int kChunksPerRow = Tile::kCols / kChunk;
    constexpr int kRowStep = Traits::kThreads / kChunksPerRow;   // rows a step, the block's
    constexpr int kWarpRowsPerStep = kWarpSize / kChunksPerRow;  // rows a step, a warp's
    constexpr int kSteps = Tile::kRows / kRowStep;
    constexpr int kWarpRows = kSteps * kWarpRowsPerStep;  // rows a warp copies: Bc / warps
    static_assert(kWarpRows <= kWarpSize, "a warp's rows' pages are one a lane");
    const int lane = thread % kWarpSize;
    const int warp_row0 = thread / kWarpSize * kWarpRowsPerStep;
    const int col = thread % kChunksPerRow * kChunk;
    const int rows_valid = block.seqlen_k - key0;
    // The warp's row j: row j % kWarpRowsPerStep of step j / kWarpRowsPerStep.
    const auto row_of = [&](int j) {
      return warp_row0 + j % kWarpRowsPerStep + j / kWarpRowsPerStep * kRowStep;
    };
    const int pages = warp_pages(row_of, kWarpRows, key0, lane);
#pragma unroll 1
    for (int step = 0; step < kSteps; ++step) {
      const int j = step * kWarpRowsPerStep + lane / kChunksPerRow;
      const int row = row_of(j);
      const int position = block.paged_position(key0 + row);
      const int page = shuffle_from(pages, j);
      const bool valid = row < rows_valid && col < cols;
      const KeyElement* src =
          t.rows<const KeyElement>(page, block.kv_head, position % sequences.page_size) + col;
      cp_async_16(tile.at(row, col), valid ? src : static_cast<const KeyElement*>(t.data), valid);
    }
  }
};

/// The row source a ForwardBlock's pipeline loads through.
template <class Traits>
FJ_DEVICE auto forward_rows(const ForwardBlock<Traits>& block, const AttentionForwardParams& p) {
  using T = typename Traits::Element;
  if constexpr (Traits::Layout::kDense) {
    return StridedRows<Traits>(head_slice<T>(p, p.o, nullptr, block.batch, block.head, block.row0),
                               block.seqlen_k, p.head_dim_v);
  } else {
    return ForwardRows<Traits>{block, p.q, p.k, p.v, p.sequences, p.head_dim_v};
  }
}

/// Writes the block's finished rows: O (normalized) and LSE, or with split-KV the fp32 partial
/// O and LSE of this split's keys (a split that saw no key writes O = 0, LSE = -inf, which
/// merge_states weighs 0). `staging` is the Q tile, free once the last product has read it.
template <class Traits, int Rows, int Cols, class Staging>
FJ_DEVICE void store_forward_outputs(const ForwardBlock<Traits>& block,
                                     const AttentionForwardParams& p, acc_tile<Rows, Cols>& o,
                                     const row_vec<Rows>& lse, Staging staging, int warp_row0,
                                     int lane) {
  using T = typename Traits::Element;
  if constexpr (Traits::Layout::kSplit) {
    store_rows_fp32(
        o, [&](int r) { return block.partial_o_row(p, r); }, warp_row0, block.rows, p.head_dim_v,
        lane);
    store_lse_to(
        lse, [&](int r) { return block.partial_lse_at(p, r); }, warp_row0, block.rows, lane);
  } else if constexpr (Traits::Layout::kDense) {
    const HeadSlice<T> slice =
        head_slice<T>(p, p.o, lse_rows(p, block.batch, block.head, block.row0), block.batch,
                      block.head, block.row0);
    store_rows<Traits::kHeadDim>(o, staging, slice.out, slice.out_row_stride, warp_row0, block.rows,
                                 lane, p.head_dim_v);
    store_lse(lse, slice.lse, warp_row0, block.rows, lane);
  } else {
    store_rows_at<Traits::kHeadDim>(
        o, staging, [&](int r) { return block.template query_row<T>(p.o, r); }, warp_row0,
        block.rows, lane, p.head_dim_v);
    if (p.lse == nullptr) return;
    store_lse_to(
        lse, [&](int r) { return block.lse_at(p, r); }, warp_row0, block.rows, lane);
  }
}

}  // namespace flashjit
