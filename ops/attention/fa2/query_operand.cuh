#pragma once
// The forward's Q operand of S = Q Kᵀ, as one warp reads its rows: from the shared Q tile on
// every key block, or (Traits::kQInRegisters) loaded into registers once, when Q has arrived
// with the first key block. Registers save the shared-memory reads of Q on every later block
// (a third of the warp's reads at Bc = 32 and head dim 64) and cost rows x head dim / 64 more
// registers per thread (attention_forward_space::q_registers_per_thread).
#include "attention/fa2/key_value_pipeline.cuh"
#include "tile/gemm.cuh"

namespace flashjit {

template <class Traits, bool InRegisters = Traits::kQInRegisters>
struct QueryOperand {
  using Pipeline = KeyValuePipeline<Traits>;
  typename Pipeline::QTile q;  // (kBlockM, kHeadDimPadded), shared
  int warp_row0;

  FJ_DEVICE QueryOperand(typename Pipeline::QTile q_, int warp_row0_)
      : q(q_), warp_row0(warp_row0_) {}

  /// Q is in shared memory for every thread: nothing to keep.
  FJ_DEVICE void arrived(int) {}

  /// s += Q Kᵀ for this warp's rows.
  template <int Rows, int Cols>
  FJ_DEVICE void scores(acc_tile<Rows, Cols>& s, typename Pipeline::KVTile keys, int lane) const {
    mma_abt(s, q, warp_row0, keys, lane);
  }
};

template <class Traits>
struct QueryOperand<Traits, true> {
  using Pipeline = KeyValuePipeline<Traits>;
  using T = typename Traits::Element;
  typename Pipeline::QTile tile;                                    // shared, read once
  operand_tile<T, Traits::kRowsPerWarp, Traits::kHeadDimPadded> q;  // (kRows, kHeadDimPadded)
  int warp_row0;

  FJ_DEVICE QueryOperand(typename Pipeline::QTile tile_, int warp_row0_)
      : tile(tile_), warp_row0(warp_row0_) {}

  /// Q is in shared memory for every thread: this warp keeps its rows.
  FJ_DEVICE void arrived(int lane) { load_operand(q, tile, warp_row0, lane); }

  /// s += Q Kᵀ for this warp's rows.
  template <int Rows, int Cols>
  FJ_DEVICE void scores(acc_tile<Rows, Cols>& s, typename Pipeline::KVTile keys, int lane) const {
    mma_abt(s, q, keys, lane);
  }
};

}  // namespace flashjit
