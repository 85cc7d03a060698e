#pragma once
// Tiles of 16-bit elements in dynamic shared memory, and the copies between them and global
// memory: the block-wide asynchronous load (cp.async, zero-filled past the valid rows and
// columns) and the warp-wide vector store of finished rows.
#include "tile/async_copy.cuh"
#include "tile/memory.cuh"
#include "tile/shared_layout.cuh"
#include "tile/warp.cuh"

namespace flashjit {

/// 16 bytes, the unit of every copy below (eight 16-bit elements).
struct alignas(16) Chunk16 {
  unsigned words[4];
};
constexpr int kChunkElements = 8;

/// A (Rows, Cols) row-major tile of T in shared memory, rows padded to shared_row_stride(Cols).
template <typename T, int Rows, int Cols>
struct smem_tile {
  static_assert(sizeof(T) == 2 && Cols % kChunkElements == 0,
                "shared tiles hold 16-bit elements in whole 16-byte chunks");
  using Element = T;
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kRowStride = shared_row_stride(Cols);  // elements
  static constexpr int kBytes = Rows * kRowStride * 2;
  T* data;

  /// Element (row, col).
  FJ_DEVICE T* at(int row, int col) const { return data + row * kRowStride + col; }
};

/// Carves a tile out of shared memory at `base`; returns the address just past it.
template <typename Tile>
FJ_DEVICE Tile carve_tile(unsigned char*& base) {
  Tile tile{reinterpret_cast<decltype(Tile::data)>(base)};
  base += Tile::kBytes;
  return tile;
}

/// Starts the block-wide copy of global rows [0, rows_valid), columns [0, cols_valid) into
/// `dst`; everything else in the tile is zero-filled (ragged sequence ends, head-dim padding).
/// `src` points at element (0, 0); rows are `row_stride` elements apart. cols_valid is a
/// multiple of 8. Every thread of the block calls it; then cp_async_commit and a wait.
template <int Threads, typename T, int Rows, int Cols>
FJ_DEVICE void load_tile_async(smem_tile<T, Rows, Cols> dst, const T* src, index_t row_stride,
                               int rows_valid, int cols_valid, int thread) {
  constexpr int kChunksPerRow = Cols / kChunkElements;
  constexpr int kChunks = Rows * kChunksPerRow;
  // Not unrolled: unrolled, the compiler hoists every chunk's row, column and address offsets
  // out of the kernel's main loop and keeps them live across it (16 chunks per tile at head dim
  // 256 over 64 threads). That alone made the backward kernels spill from head dim 176 (dK at
  // 256 with Br = Bc = 32 on sm_90a: 255 registers and 284 bytes spilled; rolled, 223 and
  // none); the forward kernels need fewer registers rolled too (169 instead of 215 at head dim
  // 128, 246 instead of 252 at 256, sm_90a).
  if constexpr (Threads % kChunksPerRow == 0) {
    // A thread's chunks share one column and lie kRowStep rows apart: its offsets are computed
    // once, and each further chunk only steps them, with no division, remainder or 64-bit
    // multiply per chunk.
    constexpr int kRowStep = Threads / kChunksPerRow;
    const int col = thread % kChunksPerRow * kChunkElements;
    int row = thread / kChunksPerRow;
    T* to = dst.at(row, col);
    index_t from = row * row_stride + col;  // an offset: past the valid rows, never an address
    const index_t from_step = kRowStep * row_stride;
    const bool col_valid = col < cols_valid;
#pragma unroll 1
    for (; row < Rows; row += kRowStep) {
      const bool valid = col_valid && row < rows_valid;
      cp_async_16(to, valid ? src + from : src, valid);
      to += kRowStep * dst.kRowStride;
      from += from_step;
    }
  } else {
#pragma unroll 1
    for (int i = 0; i < ceil_div(kChunks, Threads); ++i) {
      const int chunk = i * Threads + thread;
      if (kChunks % Threads != 0 && chunk >= kChunks) break;
      const int row = chunk / kChunksPerRow;
      const int col = chunk % kChunksPerRow * kChunkElements;
      const bool valid = row < rows_valid && col < cols_valid;
      cp_async_16(dst.at(row, col), valid ? src + row * row_stride + col : src, valid);
    }
  }
}

/// load_tile_async for rows that are not evenly spaced (pages of a KV cache, packed query
/// heads): row r < rows_valid starts at `row_at(r)`. Chunks past the valid rows and columns are
/// zero-filled and name `zero_source` (any 16-byte aligned global address; nothing is read).
template <int Threads, typename T, int Rows, int Cols, class RowAt>
FJ_DEVICE void load_tile_rows_async(smem_tile<T, Rows, Cols> dst, const RowAt& row_at,
                                    const T* zero_source, int rows_valid, int cols_valid,
                                    int thread) {
  constexpr int kChunksPerRow = Cols / kChunkElements;
  constexpr int kChunks = Rows * kChunksPerRow;
#pragma unroll 1  // rolled, as load_tile_async, so no row's address stays live across the loop
  for (int chunk = thread; chunk < kChunks; chunk += Threads) {
    const int row = chunk / kChunksPerRow;
    const int col = chunk % kChunksPerRow * kChunkElements;
    const bool valid = row < rows_valid && col < cols_valid;
    cp_async_16(dst.at(row, col), valid ? row_at(row) + col : zero_source, valid);
  }
}

/// Copies rows [first_row, first_row + Rows) of `src`, columns [0, Cols), to global memory,
/// tile row t to `row_at(t)` (rows need not be evenly spaced: pages, packed heads), skipping
/// rows at or past first_row + `rows_valid` and chunks at or past column `cols_valid` (a whole
/// number of chunks). `Workers` threads share the work, `worker` being this one's index: one
/// warp's lanes for rows the warp wrote itself (before a __syncwarp), or the whole block after
/// a __syncthreads.
template <int Rows, int Cols, int Workers = kWarpSize, typename T, int TileRows, int TileCols,
          class RowAt>
FJ_DEVICE void store_rows_from_shared_to(const RowAt& row_at, smem_tile<T, TileRows, TileCols> src,
                                         int first_row, int rows_valid, int worker,
                                         int cols_valid = Cols) {
  static_assert(Cols <= TileCols && Cols % kChunkElements == 0, "whole chunks of the tile");
  constexpr int kChunksPerRow = Cols / kChunkElements;
  constexpr int kChunks = Rows * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < ceil_div(kChunks, Workers); ++i) {
    const int chunk = i * Workers + worker;
    if (kChunks % Workers != 0 && chunk >= kChunks) break;
    const int row = chunk / kChunksPerRow;
    const int col = chunk % kChunksPerRow * kChunkElements;
    if (row >= rows_valid || col >= cols_valid) continue;
    const Chunk16 value =
        load_shared(reinterpret_cast<const Chunk16*>(src.at(first_row + row, col)), 0);
    store_global_raw(reinterpret_cast<Chunk16*>(row_at(first_row + row) + col), value);
  }
}

/// store_rows_from_shared_to for evenly spaced rows: tile row first_row goes to `dst`, the
/// next ones `row_stride` apart.
template <int Rows, int Cols, int Workers = kWarpSize, typename T, int TileRows, int TileCols>
FJ_DEVICE void store_rows_from_shared(T* dst, index_t row_stride,
                                      smem_tile<T, TileRows, TileCols> src, int first_row,
                                      int rows_valid, int worker, int cols_valid = Cols) {
  store_rows_from_shared_to<Rows, Cols, Workers>(
      [&](int tile_row) { return dst + (tile_row - first_row) * row_stride; }, src, first_row,
      rows_valid, worker, cols_valid);
}

}  // namespace flashjit
