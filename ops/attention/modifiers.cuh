#pragma once
// User score and mask modifiers in the kernels (Attention::score_mod, Attention::mask_mod). A
// kernel's Modifiers trait is NoModifiers, or a struct the host renders from the caller's
// expressions (attention/score_modifiers.cpp) with the same members:
//   kScore, kMask                      whether each is present;
//   score(score, b, h, q_idx, kv_idx)  the score the softmax sees, from the scaled (and soft-
//                                      capped) score in the natural domain;
//   mask(b, h, q_idx, kv_idx)          false hides key kv_idx from query q_idx.
// Indices are within the sequence: b the batch entry, h the query head.
#include "tile/numeric.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

struct NoModifiers {
  static constexpr bool kScore = false;
  static constexpr bool kMask = false;
  template <class Score>
  FJ_DEVICE static Score score(Score score, int, int, int, int) {
    return score;
  }
  FJ_DEVICE static bool mask(int, int, int, int) { return true; }
};

/// Applies the modifiers to a warp's score tile whose element (r, c) is tile row
/// warp_row0 + r of `block` (a query and head: block.query(), block.query_head()) and key
/// key0 + c. Scores arrive as the kernel holds them, `to_natural` times the natural-domain
/// score, and leave in the base-2 domain (the exponent scale is then 1). Elements past the
/// block's rows or the sequence's keys are left alone (the window hides those keys; those rows
/// are not stored), so a modifier never sees an index outside the sequence. `apply_mask`
/// false: the block mask says every row sees every key here, so the mask is not evaluated.
template <class Modifiers, class Block, int Rows, int Cols>
FJ_DEVICE void modify_scores(acc_tile<Rows, Cols>& s, const Block& block, int warp_row0, int key0,
                             float to_natural, bool apply_mask, int lane) {
  if (!Modifiers::kScore && !apply_mask) return;
  for_each_element(s, lane, [&](int r, int c, float& x) {
    const int row = warp_row0 + r, key = key0 + c;
    if (row >= block.rows || key >= block.seqlen_k) return;
    const int b = block.batch, h = block.query_head(row), q = block.query(row);
    if constexpr (Modifiers::kScore) x = Modifiers::score(x * to_natural, b, h, q, key) * kLog2e;
    if constexpr (Modifiers::kMask) {
      if (apply_mask && !Modifiers::mask(b, h, q, key)) x = negative_infinity();
    }
  });
}

}  // namespace flashjit
