#pragma once
// Multi-scale attention's mask M, element by element, and the key blocks a query block needs: with
// the decay mask, M[n, m] = γ^(n − m) for keys m <= n (n the query's position among the keys, i +
// seqlen_k − seqlen_q: bottom-right aligned), 0 above the diagonal, and exactly 0 where the decay
// has underflowed, so those blocks are skipped; with a mask tensor, its values and every block.
// Keys past seqlen_k weigh 0 whatever the tensor holds (they are not read).
#include "attention/parts/key_window.cuh"
#include "multiscale/multiscale_params.cuh"
#include "tile/numeric.cuh"

namespace flashjit {

/// The farthest distance n − m at which γ^(n − m) can be nonzero in fp32 (2^−160 is below the
/// smallest subnormal): past it the decay is exactly 0. 2^30 ("no limit") for γ >= 1.
FJ_DEVICE int decay_reach(float log2_gamma) {
  constexpr float kNoReach = 1073741824.0f;  // 2^30
  if (!(log2_gamma < 0.0f)) return int(kNoReach);
  const float reach = -160.0f / log2_gamma;
  return reach >= kNoReach ? int(kNoReach) : int(reach);
}

template <MultiScaleMaskKind Kind>
struct MultiScaleMask;

template <>
struct MultiScaleMask<MultiScaleMaskKind::decay> {
  int seqlen_q;
  int seqlen_k;
  int diagonal;      // seqlen_k − seqlen_q
  float log2_gamma;  // of this head's rate (−inf for γ = 0: only the diagonal is kept)
  int reach;         // decay_reach(log2_gamma)

  FJ_DEVICE MultiScaleMask(const MultiScaleParams& p, int head)
      : seqlen_q(p.attention.seqlen_q),
        seqlen_k(p.attention.seqlen_k),
        diagonal(p.attention.seqlen_k - p.attention.seqlen_q),
        log2_gamma(log2_approx(load_global(p.mask, head))),
        reach(decay_reach(log2_gamma)) {}

  /// M for query row `row`, key `key`.
  FJ_DEVICE float at(int row, int key) const {
    const int distance = row + diagonal - key;
    if (distance < 0 || row >= seqlen_q || key >= seqlen_k) return 0.0f;
    return distance == 0 ? 1.0f : exp2_approx(float(distance) * log2_gamma);
  }

  /// The rows' window of keys that can have M != 0: causal, and no farther back than the reach.
  FJ_DEVICE KeyWindow<MaskKind::window> window() const { return {seqlen_k, diagonal, reach, 0}; }
  /// The key blocks of width `block_n` where rows [first_row, last_row] have some M != 0.
  FJ_DEVICE BlockRange key_blocks(int first_row, int last_row, int block_n) const {
    return window().key_blocks(first_row, last_row, block_n);
  }
};

template <>
struct MultiScaleMask<MultiScaleMaskKind::tensor> {
  int seqlen_q;
  int seqlen_k;
  const float* values;  // this head's (seqlen_q, seqlen_k)
  index_t row_stride;

  FJ_DEVICE MultiScaleMask(const MultiScaleParams& p, int head)
      : seqlen_q(p.attention.seqlen_q),
        seqlen_k(p.attention.seqlen_k),
        values(p.mask + head * p.mask_head_stride),
        row_stride(p.mask_row_stride) {}

  FJ_DEVICE float at(int row, int key) const {
    if (row >= seqlen_q || key >= seqlen_k) return 0.0f;  // a block's padding: not read
    return load_global(values, row * row_stride + key);
  }

  FJ_DEVICE KeyWindow<MaskKind::none> window() const {
    return {seqlen_k, seqlen_k - seqlen_q, AttentionForwardParams::kNoWindow,
            AttentionForwardParams::kNoWindow};
  }
  FJ_DEVICE BlockRange key_blocks(int first_row, int last_row, int block_n) const {
    return window().key_blocks(first_row, last_row, block_n);
  }
};

}  // namespace flashjit
