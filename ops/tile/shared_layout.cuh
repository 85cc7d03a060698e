#pragma once
// How shared-memory tiles of 16-bit elements lay out their rows (host and device). Kept free of
// includes so host code (config spaces) can use it too.
namespace flashjit {

/// Elements between consecutive rows of a shared tile with `cols` 16-bit columns (a multiple
/// of 8): rows are padded to an odd number of 16-byte chunks, so the 8 row addresses of one
/// ldmatrix (and 8 consecutive cp.async chunks down a column) hit 8 different bank groups.
/// Padding works for every head dim a multiple of 8, where an XOR swizzle needs a power of two.
constexpr int shared_row_stride(int cols) { return (cols / 8) % 2 == 1 ? cols : cols + 8; }

}  // namespace flashjit
