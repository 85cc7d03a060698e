#pragma once
// Applying the mask of attention/parts/key_window.cuh to a warp's tile of scores: the keys a row
// does not see get -inf, so they weigh nothing after the softmax.
#include "attention/parts/key_window.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

/// The keys one row sees, relative to an origin: offset `x` is visible iff x − first, taken
/// unsigned, is below `count` (an empty window has count 0).
struct VisibleSpan {
  int first;
  int count;

  template <class Window>
  FJ_DEVICE VisibleSpan(const Window& window, int row, int origin) {
    const int lo = window.lo(row), hi = window.hi(row);
    first = lo - origin;
    count = hi > lo ? hi - lo : 0;
  }
  FJ_DEVICE bool hides(int offset) const { return unsigned(offset - first) >= unsigned(count); }
};

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

/// mask_scores with each row's bounds worked out once (VisibleSpan), each element then one
/// unsigned comparison against a constant: a third of the code, which NVRTC compiles that much
/// faster. For tiles of a few rows per lane (the Hopper consumers' 16-row warps): the compiler
/// keeps the spans across the key loop, two registers a row, which the mma.sync kernels' 32-row
/// warps at their register limit do not have (they spill). Without a window only the keys'
/// end hides any, the same offset in every row: one signed comparison per element.
template <class Window, int Rows, int Cols>
FJ_DEVICE void mask_scores_by_row(const Window& window, acc_tile<Rows, Cols>& s, int row0, int key0,
                                  int lane) {
  using Tile = acc_tile<Rows, Cols>;
  const int origin = key0 + fragment_col(0, 0, lane);  // the lane's first key
  if constexpr (Window::kKeysEndOnly) {
    const int end = window.seqlen_k - origin;  // offsets from `end` on are past the keys
    // Lane 0's columns are every lane's offsets from its first key.
    for_each_element(s, 0, [&](int, int offset, float& score) {
      if (offset >= end) score = negative_infinity();
    });
  } else {
#pragma unroll
    for (int slab = 0; slab < Tile::kSlabs; ++slab)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const VisibleSpan span(window, row0 + fragment_row(slab, half, lane), origin);
#pragma unroll
        for (int group = 0; group < Tile::kGroups; ++group)
#pragma unroll
          for (int pair = 0; pair < 2; ++pair) {
            float& score = s.frag[slab][group][half * 2 + pair];
            if (span.hides(group * 8 + pair)) score = negative_infinity();
          }
      }
  }
}

}  // namespace flashjit
