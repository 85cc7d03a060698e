#pragma once
// wgmma operands in the layout TMA writes with the 128-byte swizzle, so a TMA-loaded tile is
// read by wgmma as it landed, with no conversion (PTX ISA, wgmma's shared memory matrix layouts).
//
// A (Rows, Cols) tile of 16-bit T is Cols / 64 panels of (Rows, 64): panel p holds columns
// [64 p, 64 p + 64), each row one 128-byte line, lines consecutive; within each 1024-byte
// atom of 8 lines, 16-byte chunk j of line r sits at chunk j ^ r. That is exactly the shared
// image of a TMA box of 64 elements by Rows rows under CU_TENSOR_MAP_SWIZZLE_128B, one box per
// panel. The same tile serves a K-major operand (Q and K: rows are M or N, columns K) and an
// MN-major one (V as the B of P V: rows are K, columns N); the descriptors differ:
//  - K-major: start advances 32 bytes per k16 inside a panel, then to the next panel;
//    LBO unused (16), SBO 1024 (the next 8 rows);
//  - MN-major: start advances 16 lines (2048 bytes) per k16; LBO = the panel's bytes (the
//    next 64 n), SBO 1024 (the next 8 k).
// Tiles start on a 1024-byte boundary (descriptor base offset 0): align_swizzle_atom.
#include "tile/cluster.cuh"
#include "tile/fragment_store.cuh"
#include "tile/shared_layout.cuh"
#include "tile/tma.cuh"
#include "tile/warpgroup_tile.cuh"

namespace flashjit {

/// A (Rows, Cols) tile of 16-bit T in shared memory as TMA writes it with the 128-byte
/// swizzle: Cols / 64 panels of Rows 128-byte lines (see the file comment).
template <typename T, int Rows, int Cols>
struct swizzled_tile {
  static_assert(sizeof(T) == 2, "swizzled_tile: 16-bit elements (64 per 128-byte line)");
  static_assert(Rows % 8 == 0 && Rows <= 256, "whole 8-line atoms, at most a TMA box's 256 rows");
  static_assert(Cols % 64 == 0, "whole 64-column (128-byte) panels");
  using Element = T;
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kLineBytes = Swizzle128::kLineBytes;
  static constexpr int kPanelCols = kLineBytes / int(sizeof(T));  // 64
  static constexpr int kPanels = Cols / kPanelCols;
  static constexpr int kAtomBytes = Swizzle128::kAtomLines * kLineBytes;  // the swizzle's period
  static constexpr int kPanelBytes = Rows * kLineBytes;
  static constexpr int kBytes = kPanels * kPanelBytes;
  T* data;

  /// The byte offset of line `row` of panel `panel` (unswizzled: chunk 0 of line row % 8 of
  /// an atom is in place).
  FJ_HOST_DEVICE static constexpr unsigned line_offset(int panel, int row) {
    return panel * kPanelBytes + row * kLineBytes;
  }
  /// That line's first byte.
  FJ_DEVICE unsigned char* line(int panel, int row) const {
    return reinterpret_cast<unsigned char*>(data) + line_offset(panel, row);
  }

  /// Element (row, col), where the swizzle put it: chunk col % 64 / 8 of the line moves to
  /// chunk (col % 64 / 8) ^ (row % 8); elements keep their place within a chunk.
  FJ_DEVICE T* at(int row, int col) const {
    const unsigned r = row, c = col;
    constexpr unsigned kChunkCols = Swizzle128::kChunkBytes / sizeof(T);  // 8
    const unsigned chunk = (c % kPanelCols / kChunkCols) ^ (r % Swizzle128::kAtomLines);
    return reinterpret_cast<T*>(line(c / kPanelCols, r) + chunk * Swizzle128::kChunkBytes) +
           c % kChunkCols;
  }
};

/// Zeroes lines [first, Rows) of every panel of `tile`, one 16-byte store at a time, spread over
/// `threads` threads of which this is `thread`: rows a TMA box brought in past the end of a
/// packed sequence (the next sequence's, or whatever follows the last), which must read as the
/// zeros TMA fills in past a tensor's end. Whole lines, so the swizzle does not matter. The
/// caller fences (fence_proxy_async) and syncs before wgmma reads the tile.
template <typename T, int Rows, int Cols>
FJ_DEVICE void clear_lines(swizzled_tile<T, Rows, Cols> tile, int first, int thread, int threads) {
  using Tile = swizzled_tile<T, Rows, Cols>;
  constexpr int kChunksPerLine = Tile::kLineBytes / Swizzle128::kChunkBytes;
  const int chunks_per_panel = (Rows - first) * kChunksPerLine;
#pragma unroll 1
  for (int i = thread; i < Tile::kPanels * chunks_per_panel; i += threads) {
    const int panel = i / chunks_per_panel, chunk = i % chunks_per_panel;
    auto* const line = reinterpret_cast<Chunk16*>(tile.line(panel, first + chunk / kChunksPerLine));
    store_shared(line, chunk % kChunksPerLine, Chunk16{});
  }
}

/// store_fragments (fragment_store.cuh) into a swizzled tile, its address arithmetic hoisted:
/// a thread's fragments all sit at one row of an 8-line atom and one place in a 16-byte chunk,
/// so per store only the chunk moves, by a constant, and its swizzle is that constant xor the
/// thread's row in the atom. col0 is a multiple of 8 (a fragment's pair stays in one chunk).
template <typename T, int TileRows, int TileCols, int Rows, int Cols>
FJ_DEVICE void store_fragments(const acc_tile<Rows, Cols>& acc,
                               swizzled_tile<T, TileRows, TileCols> dst, int row0, int col0,
                               int lane) {
  using Tile = swizzled_tile<T, TileRows, TileCols>;
  static_assert(Rows <= TileRows && Cols <= TileCols, "the block fits the tile");
  const unsigned row = row0 + fragment_row(0, 0, lane);  // its fragments' rows: row + 8 k
  const unsigned row_in_atom = row % 8;
  const unsigned chunk0 = unsigned(col0) / 8;  // col0's chunk, counted across panels
  unsigned char* const first = dst.line(0, row) + fragment_col(0, 0, lane) * sizeof(T);
  for_each_packed_pair<T>(acc, [&](int s, int g, int half, unsigned pair) {
    const unsigned chunk = chunk0 + g;  // fragment group g's 8 columns
    const unsigned offset =
        chunk / 8 * Tile::kPanelBytes +
        (fragment_row(s, half, lane) - fragment_row(0, 0, lane)) * unsigned(Tile::kLineBytes) +
        ((chunk % 8) ^ row_in_atom) * 16;
    store_shared(reinterpret_cast<unsigned*>(first + offset), 0, pair);
  });
}

/// Rounds `base` (a pointer into dynamic shared memory) up to the next 1024-byte shared
/// address, where a swizzle atom may start; callers reserve 1024 bytes of slack for it.
FJ_DEVICE unsigned char* align_swizzle_atom(unsigned char* base) {
#if defined(FJ_DEVICE_CODE)
  const unsigned address = shared_address(base);
#else  // the emulator's shared addresses start at the dynamic buffer
  const auto address =
      static_cast<unsigned>(base - static_cast<unsigned char*>(emulator::shared_base()));
#endif
  constexpr unsigned kAtom = Swizzle128::kAtomLines * Swizzle128::kLineBytes;  // 1024
  return base + (kAtom - address % kAtom) % kAtom;
}

/// Calls issue(panel, coords) for each 64-column panel of a (·, Cols) tile, with `coords`
/// the panel's box origin: `origin` (innermost first) moved 64 · panel columns on.
template <int Cols, int Rank, class Issue>
FJ_DEVICE void for_each_panel_box(const int (&origin)[Rank], Issue issue) {
  int coords[Rank];
#pragma unroll
  for (int d = 0; d < Rank; ++d) coords[d] = origin[d];
  constexpr int kPanelCols = Swizzle128::kLineBytes / 2;  // 64 16-bit elements
#pragma unroll
  for (int panel = 0; panel < Cols / kPanelCols; ++panel) {
    coords[0] = origin[0] + kPanelCols * panel;
    issue(panel, coords);
  }
}

/// Loads the tile whose element (0, 0) is at `origin` of `map` (coords innermost first;
/// origin[0], the column, is 0) into `dst`, one box of (64 columns, Rows rows) per panel,
/// completing on `bar`: Tile::kBytes transaction bytes, out-of-range rows zero-filled. The
/// map's box is {64, Rows, 1, ...} with the 128-byte swizzle. `Evict`: the lines' L2 hint.
template <L2Evict Evict = L2Evict::normal, int Rank, typename T, int Rows, int Cols>
FJ_DEVICE void tma_load_tile(swizzled_tile<T, Rows, Cols> dst, const tma_descriptor& map,
                             const int (&origin)[Rank], mbarrier_t* bar) {
  for_each_panel_box<Cols>(origin, [&](int panel, const int(&coords)[Rank]) {
    tma_load<Evict>(dst.line(panel, 0), map, coords, bar);
  });
}

/// A cluster of Blocks blocks that all load one tile, each its share and multicast to all:
/// block `rank`'s share is rows [rank · kRows, (rank + 1) · kRows) of each panel, whole 8-line
/// atoms, so that it lands swizzled as the whole tile would. A producer finds its share's first
/// row in the tensor (first_row on from the tile's) and in the tile (at), and loads it with
/// tma_load_share_multicast.
template <int Blocks, int Rows>
struct ClusterShare {
  static_assert(Blocks >= 2 && Blocks <= 16 && Rows % (8 * Blocks) == 0,
                "a share of whole swizzle atoms for each block of the cluster");
  static constexpr int kRows = Rows / Blocks;
  int first_row;

  FJ_DEVICE explicit ClusterShare(unsigned rank) : first_row(int(rank) * kRows) {}
  /// `tile` moved on to this share's first line: its panels' lines first_row on.
  template <typename T, int Cols>
  FJ_DEVICE swizzled_tile<T, Rows, Cols> at(swizzled_tile<T, Rows, Cols> tile) const {
    return {tile.data + first_row * swizzled_tile<T, Rows, Cols>::kLineBytes / 2};
  }
};

/// Loads a share (ClusterShare) of a tile: the box at `origin` (coords innermost first,
/// origin[0] = 0, origin[1] the share's first row) into `share` (ClusterShare::at of the tile)
/// of every block of the cluster, one box of (64 columns, Rows / Blocks rows) per panel,
/// completing on each block's mbarrier at `bar`'s offset. Once every block has loaded its share,
/// each block's `bar` has had Tile::kBytes transaction bytes. The map's box is
/// {64, Rows / Blocks, 1, ...} with the 128-byte swizzle.
template <int Blocks, L2Evict Evict = L2Evict::normal, int Rank, typename T, int Rows, int Cols>
FJ_DEVICE void tma_load_share_multicast(swizzled_tile<T, Rows, Cols> share,
                                        const tma_descriptor& map, const int (&origin)[Rank],
                                        mbarrier_t* bar) {
  constexpr auto kEveryBlock = static_cast<unsigned short>((1u << Blocks) - 1u);
  for_each_panel_box<Cols>(origin, [&](int panel, const int(&coords)[Rank]) {
    tma_load_multicast<Evict>(share.line(panel, 0), map, coords, bar, kEveryBlock);
  });
}

/// Stores rows [row0, row0 + BoxRows) of `src` to the tensor of `map` at `origin` (coords
/// innermost first, origin[0] = 0), one box of (64 columns, BoxRows rows) per panel; elements
/// outside the tensor (rows past its length, columns past its width) are not written. The
/// map's box is {64, BoxRows, 1, ...} with the 128-byte swizzle; row0 is a multiple of 8, so
/// each box starts on a swizzle atom. The caller commits and waits for the bulk group.
template <int BoxRows, int Rank, typename T, int Rows, int Cols>
FJ_DEVICE void tma_store_rows(const tma_descriptor& map, const int (&origin)[Rank],
                              swizzled_tile<T, Rows, Cols> src, int row0) {
  static_assert(BoxRows % 8 == 0 && BoxRows <= Rows, "whole swizzle atoms within the tile");
  for_each_panel_box<Cols>(origin, [&](int panel, const int(&coords)[Rank]) {
    tma_store(map, coords, src.line(panel, row0));
  });
}

/// The descriptor of k16 step 0 of a K-major operand: rows [row0, row0 + 64) (A) or
/// [row0, row0 + N) (B) of `tile`, whose columns are K; row0 a multiple of 8 (a whole atom).
template <typename T, int Rows, int Cols>
FJ_DEVICE unsigned long long k_major_descriptor(swizzled_tile<T, Rows, Cols> tile, int row0) {
  using Tile = swizzled_tile<T, Rows, Cols>;
  return advance_descriptor(make_descriptor(tile.data, /*leading (unused)=*/16, Tile::kAtomBytes,
                                            WgmmaLayout::swizzle_128b),
                            Tile::line_offset(0, row0));
}
/// The bytes from k16 step 0 to step `step` of a K-major operand: 32 per step within a panel,
/// then the next panel.
template <typename T, int Rows, int Cols>
FJ_HOST_DEVICE constexpr unsigned k_major_step_bytes(swizzled_tile<T, Rows, Cols>, int step) {
  using Tile = swizzled_tile<T, Rows, Cols>;
  const int k0 = 16 * step;  // (the first k of the step)
  return Tile::line_offset(k0 / 64, 0) + k0 % 64 * 2;
}

/// The descriptor of k16 step 0 of an MN-major operand: `tile`'s rows are K, its columns N
/// (V as the B of P V).
template <typename T, int Rows, int Cols>
FJ_DEVICE unsigned long long mn_major_descriptor(swizzled_tile<T, Rows, Cols> tile) {
  using Tile = swizzled_tile<T, Rows, Cols>;
  return make_descriptor(tile.data, Tile::kPanelBytes, Tile::kAtomBytes, WgmmaLayout::swizzle_128b);
}
/// The bytes from k16 step 0 to step `step` of an MN-major operand: 16 lines per step.
template <typename T, int Rows, int Cols>
FJ_HOST_DEVICE constexpr unsigned mn_major_step_bytes(swizzled_tile<T, Rows, Cols>, int step) {
  return swizzled_tile<T, Rows, Cols>::line_offset(0, 16 * step);
}

// The products S = Q Kᵀ and O += P V on these tiles are warpgroup_abt and warpgroup_ab of
// tile/warpgroup_tile.cuh, which find the descriptors above by overload.

}  // namespace flashjit
