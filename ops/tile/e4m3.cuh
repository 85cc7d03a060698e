#pragma once
// fp8 e4m3 (OCP FP8's E4M3: 1 sign, 4 exponent bits of bias 7, 3 mantissa bits, no infinity)
// tiles in shared memory: an fp8 KV cache's blocks land there as bytes (cp.async, half the
// bytes of a 16-bit block) and each thread converts the chunks it copied into the 16-bit tile
// the tensor cores read. Every e4m3 value is exact in fp16 and in bf16, so the conversion loses
// nothing; the cache's scale factors are applied in fp32 by the kernel, not here.
// The fp8 forward multiplies e4m3 itself (m16n8k32): P rounded to e4m3 in A fragments, and V's
// rows in the order those fragments give P's columns.
#include "tile/numeric.cuh"
#include "tile/operand_tile.cuh"
#include "tile/shared_tile.cuh"

namespace flashjit {

/// fp8 elements in one 16-byte chunk.
constexpr int kE4m3ChunkElements = 16;

/// A (Rows, Cols) row-major tile of e4m3 bytes in shared memory, unpadded: a warp's copies and
/// its reads during the conversion touch consecutive 16-byte chunks.
template <int Rows, int Cols>
struct e4m3_tile {
  static_assert(Cols % kE4m3ChunkElements == 0, "whole 16-byte chunks of fp8");
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kBytes = Rows * Cols;
  unsigned char* data;

  FJ_DEVICE unsigned char* at(int row, int col) const { return data + row * Cols + col; }
};

/// Calls f(row, col) for the 16-byte chunks of a (Rows, Cols) fp8 tile that are this thread's:
/// chunk c is thread c % Threads's. The copy and the conversion deal them alike, so each thread
/// converts only what its own wait has landed.
template <int Threads, int Rows, int Cols, class F>
FJ_DEVICE void for_each_own_chunk(int thread, const F& f) {
  constexpr int kChunksPerRow = Cols / kE4m3ChunkElements;
  constexpr int kChunks = Rows * kChunksPerRow;
#pragma unroll 1
  for (int chunk = thread; chunk < kChunks; chunk += Threads) {
    f(chunk / kChunksPerRow, chunk % kChunksPerRow * kE4m3ChunkElements);
  }
}

/// load_tile_rows_async for fp8 rows: starts copying rows [0, rows_valid), columns [0,
/// cols_valid) (a multiple of 16) into `dst`, row r from `row_at(r)`, zero-filling the rest.
template <int Threads, int Rows, int Cols, class RowAt>
FJ_DEVICE void load_e4m3_rows_async(e4m3_tile<Rows, Cols> dst, const RowAt& row_at,
                                    const unsigned char* zero_source, int rows_valid,
                                    int cols_valid, int thread) {
  for_each_own_chunk<Threads, Rows, Cols>(thread, [&](int row, int col) {
    const bool valid = row < rows_valid && col < cols_valid;
    cp_async_16(dst.at(row, col), valid ? row_at(row) + col : zero_source, valid);
  });
}

/// Converts to `dst` the chunks of `staging` this thread copied in, after its cp_async_wait
/// and before the block barrier that publishes `dst` (with a TMA-staged tile, every thread's
/// chunks once its bytes have landed). `Dst` is a (Rows, Cols) tile of a 16-bit type with
/// `at(row, col)`: smem_tile, or a swizzled_tile (each 8-element half of a converted chunk is
/// one 16-byte chunk of it). Every byte converts to a finite value (the NaN pattern reads as
/// 480), so rows read past a sequence's keys are harmless where their scores are masked (P = 0).
template <int Threads, class Dst, int Rows, int Cols>
FJ_DEVICE void convert_e4m3_tile(e4m3_tile<Rows, Cols> staging, Dst dst, int thread) {
  using T = typename Dst::Element;
  static_assert(Dst::kRows == Rows && Dst::kCols == Cols, "the staging tile's shape");
  for_each_own_chunk<Threads, Rows, Cols>(thread, [&](int row, int col) {
    const Chunk16 bytes = load_shared(reinterpret_cast<const Chunk16*>(staging.at(row, col)), 0);
    Chunk16 halves[2];
#pragma unroll
    for (int i = 0; i < kE4m3ChunkElements; i += 2) {
      const unsigned word = bytes.words[i / 4] >> (i % 4 * 8);
      const T first = from_float<T>(float_from_e4m3(word));
      const T second = from_float<T>(float_from_e4m3(word >> 8));
      halves[i / 8].words[i % 8 / 2] = unsigned(first.bits) | unsigned(second.bits) << 16;
    }
    store_shared(reinterpret_cast<Chunk16*>(dst.at(row, col)), 0, halves[0]);
    store_shared(reinterpret_cast<Chunk16*>(dst.at(row, col + kChunkElements)), 0, halves[1]);
  });
}

/// The power of two the fp8 forwards shift P by before rounding it to e4m3 (OnlineSoftmax's
/// Offset): P ≤ 2^8 stays below e4m3's largest value, 448, and probabilities down to 2^−14 keep
/// e4m3's three mantissa bits.
constexpr int kE4m3ProbabilityShift = 8;

/// P for an fp8 product: `acc` rounded to e4m3 (saturating) as the A operand of m16n8k32 steps,
/// two codes an element. A thread's accumulators hold columns 2t and 2t + 1 of each 8-column
/// group and an A register takes four consecutive k, so a register takes two groups' pairs:
/// k position 4t + i of each 16 holds column 2t + (i & 1) + 8 (i >> 1) of those 16. The
/// columns are permuted, not moved between threads; B's rows (V's keys) must be permuted
/// alike (e4m3_value_row).
template <int Rows, int Cols>
FJ_DEVICE operand_tile<e4m3x2_t, Rows, Cols / 2> to_e4m3_operand(const acc_tile<Rows, Cols>& acc) {
  static_assert(Cols % 32 == 0, "whole m16n8k32 steps");
  operand_tile<e4m3x2_t, Rows, Cols / 2> a;
#pragma unroll
  for (int s = 0; s < a.kSlabs; ++s)
#pragma unroll
    for (int k = 0; k < a.kSteps; ++k) {
      const float(&g0)[4] = acc.frag[s][4 * k];
      const float(&g1)[4] = acc.frag[s][4 * k + 1];
      const float(&g2)[4] = acc.frag[s][4 * k + 2];
      const float(&g3)[4] = acc.frag[s][4 * k + 3];
      a.frag[s][k] = {
          {pack4_e4m3(g0[0], g0[1], g1[0], g1[1]), pack4_e4m3(g0[2], g0[3], g1[2], g1[3]),
           pack4_e4m3(g2[0], g2[1], g3[0], g3[1]), pack4_e4m3(g2[2], g2[3], g3[2], g3[3])}};
    }
  return a;
}

/// The key (row of V, within a 32-key step) at k position 4t + j of half h of the step, as
/// to_e4m3_operand orders P's columns: 16h + 2t + (j & 1) + 8 (j >> 1).
FJ_HOST_DEVICE constexpr int e4m3_value_row(int h, int t, int j) {
  return 16 * h + 2 * t + (j & 1) + 8 * (j >> 1);
}

/// A 4 × 4 block of bytes transposed: byte j of columns[i] is byte i of rows[j].
FJ_DEVICE void transpose_bytes(const unsigned (&rows)[4], unsigned (&columns)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    columns[i] = (rows[0] >> 8 * i & 0xffu) | (rows[1] >> 8 * i & 0xffu) << 8 |
                 (rows[2] >> 8 * i & 0xffu) << 16 | (rows[3] >> 8 * i & 0xffu) << 24;
  }
}

}  // namespace flashjit
