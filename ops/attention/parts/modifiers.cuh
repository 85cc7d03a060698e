#pragma once
// User score and mask modifiers in the kernels (Attention::score_mod, Attention::mask_mod). A
// kernel's Modifiers trait is NoModifiers, or a struct the host renders from the caller's
// expressions (attention/modifiers/score_modifiers.cpp) with the same members:
//   kScore, kMask                      whether each is present;
//   kDropout                           whether P is dropped (attention/parts/dropout.cuh);
//   score(score, b, h, q_idx, kv_idx, captures)  the score the softmax sees, from the scaled
//                                      (and soft-capped) score in the natural domain;
//   mask(b, h, q_idx, kv_idx, captures)  false hides key kv_idx from query q_idx;
// `captures` the tensors the expressions read (attention/parts/captures.cuh); and for the backward,
//   kCaptureGradients                  whether some capture has a gradient (Capture::grad);
//   add_capture_gradients(score, ds, b, h, q_idx, kv_idx, captures)  adds ds times
//                                      ∂score/∂element into the gradient of each such capture
//                                      at the element score_mod read.
// Indices are within the sequence: b the batch entry, h the query head. The backward evaluates
// score() on dual numbers (attention/parts/dual_number.cuh) for ∂score/∂score.
#include "attention/parts/capture_view.cuh"
#include "attention/parts/dual_number.cuh"
#include "tile/numeric.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

struct NoModifiers {
  static constexpr bool kScore = false;
  static constexpr bool kMask = false;
  static constexpr bool kDropout = false;
  static constexpr bool kCaptureGradients = false;
  template <class Score>
  FJ_DEVICE static Score score(Score score, int, int, int, int, const CaptureTable&) {
    return score;
  }
  FJ_DEVICE static bool mask(int, int, int, int, const CaptureTable&) { return true; }
  FJ_DEVICE static void add_capture_gradients(float, float, int, int, int, int,
                                              const CaptureTable&) {}
};

/// Applies the modifiers to one score of tile row `row` of `block` (a query and head:
/// block.query(), block.query_head()) and key `key`. Scores arrive as the kernel holds them,
/// `to_natural` times the natural-domain score, and leave in the base-2 domain (the exponent
/// scale is then 1). Scores past the block's rows or the sequence's keys are left alone (the
/// window hides those keys; those rows are not stored), so a modifier never sees an index
/// outside the sequence. `apply_mask` false: the block mask says every row sees every key here,
/// so the mask is not evaluated.
template <class Modifiers, class Block>
FJ_DEVICE void modify_score(float& x, const Block& block, int row, int key, float to_natural,
                            bool apply_mask, const CaptureTable& captures) {
  if (row >= block.rows || key >= block.seqlen_k) return;
  const int b = block.batch, h = block.query_head(row), q = block.query(row);
  if constexpr (Modifiers::kScore)
    x = Modifiers::score(x * to_natural, b, h, q, key, captures) * kLog2e;
  if constexpr (Modifiers::kMask) {
    if (apply_mask && !Modifiers::mask(b, h, q, key, captures)) x = negative_infinity();
  }
}

/// modify_score on a warp's score tile whose element (r, c) is tile row warp_row0 + r and key
/// key0 + c.
template <class Modifiers, class Block, int Rows, int Cols>
FJ_DEVICE void modify_scores(acc_tile<Rows, Cols>& s, const Block& block, int warp_row0, int key0,
                             float to_natural, bool apply_mask, const CaptureTable& captures,
                             int lane) {
  if (!Modifiers::kScore && !apply_mask) return;
  for_each_element(s, lane, [&](int r, int c, float& x) {
    modify_score<Modifiers>(x, block, warp_row0 + r, key0 + c, to_natural, apply_mask, captures);
  });
}

/// modify_scores on a transposed tile: element (r, c) is key key0 + r, tile row row0 + c.
template <class Modifiers, class Block, int Rows, int Cols>
FJ_DEVICE void modify_scores_transposed(acc_tile<Rows, Cols>& s_t, const Block& block, int row0,
                                        int key0, float to_natural, bool apply_mask,
                                        const CaptureTable& captures, int lane) {
  if (!Modifiers::kScore && !apply_mask) return;
  for_each_element(s_t, lane, [&](int r, int c, float& x) {
    modify_score<Modifiers>(x, block, row0 + c, key0 + r, to_natural, apply_mask, captures);
  });
}

/// Where a score of the backward's tiles sits: its query head, query and key positions within
/// the sequence, and whether it is a real score (a row of the block, a key of the sequence).
struct ScorePosition {
  bool valid;
  int head, query, key;
};

/// The modifiers in the backward, on a warp's (Rows, Cols) score tile in the base-2 domain (as
/// ScoreScaling leaves it): apply() recomputes the scores the forward's softmax saw and keeps
/// ∂score_mod/∂score per score, evaluated on dual numbers; chain() takes dS of the modified
/// scores to dS of the scores the modifier was given. A hidden key gets −inf and slope 0.
template <class Modifiers, int Rows, int Cols>
struct ModifiedScores {
  static constexpr bool kAny = Modifiers::kScore || Modifiers::kMask;
  acc_tile<Rows, Cols> slope;    // ∂score_mod/∂score (the score modifier's only)
  acc_tile<Rows, Cols> natural;  // the score score_mod was given (for captures' gradients only)

  /// `at(r, c)`: the ScorePosition of tile element (r, c); `batch` the sequence's index.
  template <class Position>
  FJ_DEVICE void apply(acc_tile<Rows, Cols>& s, int batch, const Position& at,
                       const CaptureTable& captures, int lane) {
    if constexpr (kAny) {
      for_each_slot<Rows, Cols>(lane, [&](const ElementSlot& x) {
        const ScorePosition p = at(x.row, x.col);
        if constexpr (Modifiers::kCaptureGradients) natural[x] = s[x] * kLn2;
        float slope_here = 1.0f;
        if (p.valid) {
          if constexpr (Modifiers::kScore) {
            const Dual<float> y = Modifiers::score(Dual<float>(s[x] * kLn2, 1.0f), batch, p.head,
                                                   p.query, p.key, captures);
            s[x] = y.value * kLog2e;
            slope_here = y.slope;
          }
          if constexpr (Modifiers::kMask) {
            if (!Modifiers::mask(batch, p.head, p.query, p.key, captures)) {
              s[x] = negative_infinity();
              slope_here = 0.0f;
            }
          }
        }
        if constexpr (Modifiers::kScore) slope[x] = slope_here;
      });
    }
  }

  /// Adds each dS (of the modified scores, before chain()) times ∂score_mod/∂element into the
  /// gradients of the captures that have one (Modifiers::add_capture_gradients), at the
  /// elements score_mod read; elements with dS = 0 add nothing.
  template <class Position>
  FJ_DEVICE void add_capture_gradients(const acc_tile<Rows, Cols>& ds, int batch,
                                       const Position& at, const CaptureTable& captures,
                                       int lane) const {
    if constexpr (Modifiers::kCaptureGradients) {
      for_each_slot<Rows, Cols>(lane, [&](const ElementSlot& x) {
        const ScorePosition p = at(x.row, x.col);
        if (ds[x] == 0.0f || !p.valid) return;
        Modifiers::add_capture_gradients(natural[x], ds[x], batch, p.head, p.query, p.key,
                                         captures);
      });
    }
  }

  /// ds ∘= slope; an element with dS = 0 (P = 0: hidden, or masked by the window after apply)
  /// stays 0 whatever the slope there (a modifier's slope may be infinite where it is unused).
  FJ_DEVICE void chain(acc_tile<Rows, Cols>& ds, int lane) const {
    if constexpr (Modifiers::kScore) {
      for_each_slot<Rows, Cols>(
          lane, [&](const ElementSlot& x) { ds[x] = ds[x] == 0.0f ? 0.0f : ds[x] * slope[x]; });
    }
  }
};

}  // namespace flashjit
