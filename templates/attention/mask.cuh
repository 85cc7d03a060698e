#pragma once
// Applying the mask of attention/key_window.cuh to a warp's tile of scores: the keys a row does
// not see get -inf, so they weigh nothing after the softmax.
#include "attention/key_window.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

/// Sets the scores of invisible keys to -inf. `s` is the warp's (rows, keys) tile whose
/// element (r, c) is query row0 + r, key key0 + c.
template <class Window, int Rows, int Cols>
FJ_DEVICE void mask_scores(const Window& window, acc_tile<Rows, Cols>& s, int row0, int key0,
                           int lane) {
  for_each_element(s, lane, [&](int r, int c, float& score) {
    const int key = key0 + c;
    if (key < window.lo(row0 + r) || key >= window.hi(row0 + r)) score = negative_infinity();
  });
}

/// mask_scores for a transposed tile: element (r, c) is key key0 + r, query row0 + c.
template <class Window, int Rows, int Cols>
FJ_DEVICE void mask_scores_transposed(const Window& window, acc_tile<Rows, Cols>& s_t, int key0,
                                      int row0, int lane) {
  for_each_element(s_t, lane, [&](int r, int c, float& score) {
    const int key = key0 + r;
    if (key < window.lo(row0 + c) || key >= window.hi(row0 + c)) score = negative_infinity();
  });
}

}  // namespace flashjit
