#pragma once
// How shared-memory tiles lay out their rows, host and device alike: plain constants and
// constexpr functions, free of includes, so host code (config spaces, tensor maps) uses them too.
// Two layouts: the mma.sync kernels pad each row (shared_row_stride); the Hopper kernels swizzle
// (Swizzle128).
namespace flashjit {

/// Elements between consecutive rows of a shared tile with `cols` 16-bit columns (a multiple
/// of 8): rows are padded to an odd number of 16-byte chunks, so the 8 row addresses of one
/// ldmatrix (and 8 consecutive cp.async chunks down a column) hit 8 different bank groups.
/// Padding works for every head dim a multiple of 8, where an XOR swizzle needs a power of two.
constexpr int shared_row_stride(int cols) { return (cols / 8) % 2 == 1 ? cols : cols + 8; }

/// The one shared-memory swizzle of the Hopper kernels, stated once: TMA's 128-byte pattern
/// (CU_TENSOR_MAP_SWIZZLE_128B), which wgmma reads as it landed (PTX ISA, wgmma's shared memory
/// matrix layouts). A line is one row's 128 bytes; within each atom of 8 lines, 16-byte chunk j
/// of line r sits at chunk j ^ r. The device tiles lay their operands out by it
/// (swizzled_tile.cuh), and the host builds its tensor maps from it (boxes one line wide, the
/// mode of that line's width: attention/hopper/attention_forward_tma.cpp), so the two cannot
/// disagree.
struct Swizzle128 {
  // Enumerators, not static data members: NVRTC would emit those as PTX globals.
  enum : int {
    kLineBytes = 128,  // one row of a panel, and a tensor map box's width in bytes
    kChunkBytes = 16,  // what the pattern moves
    kAtomLines = 8,    // the pattern's period: chunk j of line r goes to j ^ (r % 8)
  };
};

}  // namespace flashjit
