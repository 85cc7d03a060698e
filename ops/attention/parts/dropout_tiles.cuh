#pragma once
// Dropout on the kernels' probability tiles: the mask of attention/parts/dropout.cuh applied
// to the forward's P (which then multiplies V) and, in the backward, to dP and to the P that
// multiplies dO.
#include "attention/parts/dropout.cuh"
#include "tile/register_tile.cuh"

namespace flashjit {

/// Drops the probabilities of a warp's (queries, keys) tile: element (r, c) is query
/// `query(r)` and key key0 + c of query head `batch_head(r)` (b · heads_q + h). The kept ones
/// stay unscaled: the forward scales its output by 1 / (1 − p) once, at the end. A lane's two
/// elements of a fragment's half are adjacent keys of one query: one Philox call serves both.
template <class Query, class BatchHead, class Tile>
FJ_DEVICE void drop_probabilities(Tile& p, const DropoutParams& d, const Query& query,
                                  const BatchHead& batch_head, int key0, int lane) {
#pragma unroll
  for (int slab = 0; slab < Tile::kSlabs; ++slab)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = fragment_row(slab, half, lane);
      const int i = query(r), bh = batch_head(r);
#pragma unroll
      for (int group = 0; group < Tile::kGroups; ++group) {
        const int j = key0 + fragment_col(group, 0, lane);  // even
        const DropoutWords words(d, bh, i, j);
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
          if (!words.keeps(d, i, j + pair)) p.frag[slab][group][half * 2 + pair] = 0.0f;
        }
      }
    }
}

/// The backward's dS with dropout, on a (queries, keys) tile pair of query head `batch_head`
/// whose element (r, c) is query query0 + r, key key0 + c: with Z = 1 / (1 − p) where kept and
/// 0 where dropped, dP ∘ Z is the gradient of the undropped P, so dS = P ∘ (dP ∘ Z − D).
/// `ds` holds dP on entry, dS on return; `delta` is D per row.
template <class Tile, class Rows>
FJ_DEVICE void dropout_score_gradients(const Tile& p, Tile& ds, const Rows& delta,
                                       const DropoutParams& d, int batch_head, int query0, int key0,
                                       int lane) {
#pragma unroll
  for (int slab = 0; slab < Tile::kSlabs; ++slab)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = query0 + fragment_row(slab, half, lane);
#pragma unroll
      for (int group = 0; group < Tile::kGroups; ++group) {
        const int j = key0 + fragment_col(group, 0, lane);  // even
        const DropoutWords words(d, batch_head, i, j);
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
          const int e = half * 2 + pair;
          const float z = words.keeps(d, i, j + pair) ? d.scale : 0.0f;
          ds.frag[slab][group][e] =
              p.frag[slab][group][e] * (ds.frag[slab][group][e] * z - delta.v[slab * 2 + half]);
        }
      }
    }
}

/// dropout_score_gradients on transposed (keys, queries) tiles, element (r, c) key key0 + r and
/// query query0 + c (`delta` per column), which also turns Pᵀ into (P ∘ Z)ᵀ for dV = (P ∘ Z)ᵀ dO.
/// Here a lane's pair is two adjacent queries of one key. `query0` even.
template <class Tile, class Cols>
FJ_DEVICE void dropout_gradients_transposed(Tile& p_t, Tile& ds_t, const Cols& delta,
                                            const DropoutParams& d, int batch_head, int key0,
                                            int query0, int lane) {
#pragma unroll
  for (int slab = 0; slab < Tile::kSlabs; ++slab)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int j = key0 + fragment_row(slab, half, lane);
#pragma unroll
      for (int group = 0; group < Tile::kGroups; ++group) {
        const int i = query0 + fragment_col(group, 0, lane);  // even
        const DropoutWords words(d, batch_head, i, j);
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
          const int e = half * 2 + pair;
          const float z = words.keeps(d, i + pair, j) ? d.scale : 0.0f;
          float& p = p_t.frag[slab][group][e];
          ds_t.frag[slab][group][e] = p * (ds_t.frag[slab][group][e] * z - delta.v[group][pair]);
          p *= z;
        }
      }
    }
}

}  // namespace flashjit
