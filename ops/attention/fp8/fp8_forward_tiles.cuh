#pragma once
// The fp8 forward's shared memory and its copies. Q and K land as they are, two e4m3 codes an
// element (e4m3x2_t), which is what S = Q Kᵀ reads: both operands of m16n8k32 take k (the
// head dim) in consecutive bytes. P V needs V with its keys in consecutive bytes, that is Vᵀ,
// and its keys in the order to_e4m3_operand gives P's columns (tile/e4m3.cuh), so V lands in a
// staging slot and each thread transposes the chunks it copied itself: four key rows of one
// 16-byte column chunk, which after a 4 × 4 byte transposition are four bytes of sixteen rows
// of Vᵀ. No barrier is needed between a thread's wait and its transposition. K and Vᵀ have two
// slots each, so one barrier a key block publishes block n's and frees block n − 1's.
#include "attention/fp8/fp8_forward_traits.cuh"
#include "attention/parts/forward_block.cuh"
#include "tile/e4m3.cuh"

namespace flashjit {

template <class Traits>
struct Fp8ForwardTiles {
  using T = e4m3x2_t;
  static constexpr int kD = Traits::kHeadDimPadded;
  static constexpr int kBlockN = Traits::kBlockN;
  using QTile = smem_tile<T, Traits::kBlockM, kD / 2>;
  using KTile = smem_tile<T, kBlockN, kD / 2>;
  using ValuesT = smem_tile<T, kD, kBlockN / 2>;  // Vᵀ: (head dim, keys)
  using OutputTile = smem_tile<typename Traits::Output, Traits::kBlockM, kD>;
  /// A V copy unit: rows e4m3_value_row(h, t, 0..3) of a 32-key step, one 16-byte column chunk.
  static constexpr int kColumnChunks = kD / 16;
  static constexpr int kUnits = kBlockN / 32 * 8 * kColumnChunks;
  static constexpr int kStagingBytes = 4 * kUnits * 16;  // one slot: kBlockN × kD bytes

  QTile q;
  KTile k0;                   // slot 0 of two; slot 1 follows
  unsigned char* v_staging0;  // slot 0 of two: [4][kUnits] chunks, a unit's row j at j
  ValuesT values_t0;          // slot 0 of two; slot 1 follows
  OutputTile output;          // O at the end, over the tiles above

  FJ_DEVICE explicit Fp8ForwardTiles(unsigned char* base) {
    output = {reinterpret_cast<typename Traits::Output*>(base)};
    q = carve_tile<QTile>(base);
    k0 = carve_tile<KTile>(base);
    base += KTile::kBytes;
    v_staging0 = base;
    base += 2 * kStagingBytes;
    values_t0 = carve_tile<ValuesT>(base);  // slot 1 follows
  }

  FJ_DEVICE KTile keys(int block) const {
    return {k0.data + block % 2 * (KTile::kBytes / int(sizeof(T)))};
  }
  FJ_DEVICE ValuesT values_t(int block) const {
    return {values_t0.data + block % 2 * (ValuesT::kBytes / int(sizeof(T)))};
  }

  /// Starts copying this thread's units of V's block (rows from `row_at(r)`, the first
  /// `keys_valid` rows and `cols_valid` columns, zeros elsewhere) into staging slot block % 2.
  template <class RowAt>
  FJ_DEVICE void load_values(int block, const RowAt& row_at, const unsigned char* zero_source,
                             int keys_valid, int cols_valid, int thread) const {
#pragma unroll 1
    for (int u = thread; u < kUnits; u += Traits::kThreads) {
      const Unit unit(u);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = unit.row(j);
        const bool valid = row < keys_valid && unit.col < cols_valid;
        cp_async_16(chunk(block, j, u), valid ? row_at(row) + unit.col : zero_source, valid);
      }
    }
  }

  /// After this thread's wait for V's block: its units transposed into Vᵀ's slot block % 2
  /// (published by the block barrier that follows).
  FJ_DEVICE void transpose_values(int block, int thread) const {
#pragma unroll 1
    for (int u = thread; u < kUnits; u += Traits::kThreads) {
      const Unit unit(u);
#pragma unroll
      for (int turn = 0; turn < 4; ++turn) {
        // Columns 4 word .. 4 word + 3 of the chunk, a word of each row at a time (four
        // registers live beside O, not sixteen). The eight-thread groups of a warp start at
        // different words: their 4-byte reads, 16 bytes apart, then fall on 32 distinct banks
        // (4-way conflicts in order), and their stores to V^T rows 16 apart on 2-way ones.
        const int word = (turn + u / 8) % 4;
        unsigned four_rows[4], four_columns[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          four_rows[j] = load_shared(reinterpret_cast<const unsigned*>(chunk(block, j, u)), word);
        }
        transpose_bytes(four_rows, four_columns);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          T* at = values_t(block).at(unit.col + 4 * word + i, unit.first_position / 2);
          store_shared(reinterpret_cast<unsigned*>(at), 0, four_columns[i]);
        }
      }
    }
  }

 private:
  /// Copy unit u: 32-key step, half h and quad t of it, column chunk.
  struct Unit {
    int first_row;       // of the unit's four key rows, in the block
    int t;               // e4m3_value_row's t
    int h;               // and h
    int col;             // its first column
    int first_position;  // its four keys' first byte in a row of Vᵀ
    FJ_DEVICE explicit Unit(int u) {
      t = u % 4;
      h = u / 4 % 2;
      col = u / 8 % kColumnChunks * 16;
      const int step = u / (8 * kColumnChunks);
      first_row = step * 32;
      first_position = step * 32 + h * 16 + t * 4;
    }
    FJ_DEVICE int row(int j) const { return first_row + e4m3_value_row(h, t, j); }
  };

  /// Row j of unit u in staging slot block % 2: chunks of one j side by side, so a warp's
  /// copies and reads touch consecutive 16-byte chunks.
  FJ_DEVICE unsigned char* chunk(int block, int j, int u) const {
    return v_staging0 + block % 2 * kStagingBytes + (j * kUnits + u) * 16;
  }
};

/// The copies of a ForwardBlock's rows (any layout it addresses) into its tiles, each key or
/// value block a cp.async group of its own; Q joins the first key block's group.
template <class Traits>
struct Fp8ForwardCopies {
  using T = e4m3x2_t;
  const ForwardBlock<Traits>& block;
  const AttentionForwardParams& params;
  const Fp8ForwardTiles<Traits>& tiles;
  int thread;

  FJ_DEVICE void queries(int rows) const {
    load_tile_rows_async<Traits::kThreads>(
        tiles.q,
        [&](int r) {
          return reinterpret_cast<const T*>(
              block.template query_row<const unsigned char>(params.q, r));
        },
        reinterpret_cast<const T*>(zero_source()), rows, Traits::kHeadDim / 2, thread);
  }
  FJ_DEVICE void keys(int n) const {
    const int key0 = n * Traits::kBlockN;
    load_tile_rows_async<Traits::kThreads>(
        tiles.keys(n),
        [&](int r) { return reinterpret_cast<const T*>(key_row(params.k, key0 + r)); },
        reinterpret_cast<const T*>(zero_source()), block.seqlen_k - key0, Traits::kHeadDim / 2,
        thread);
    cp_async_commit();
  }
  FJ_DEVICE void values(int n) const {
    const int key0 = n * Traits::kBlockN;
    tiles.load_values(
        n, [&](int r) { return key_row(params.v, key0 + r); }, zero_source(), block.seqlen_k - key0,
        params.head_dim_v, thread);
    cp_async_commit();
  }

 private:
  FJ_DEVICE const unsigned char* key_row(const HeadTensor& t, int key) const {
    return block.template key_row<unsigned char>(t, params.sequences, key);
  }
  /// What a zero-filled copy names as its source (it reads none of it).
  FJ_DEVICE const unsigned char* zero_source() const {
    return static_cast<const unsigned char*>(params.k.data);
  }
};

}  // namespace flashjit
