#pragma once
// Multi-scale attention (retention) forward, the source document's fused loop (section 4.4,
// Listing 1): one CTA owns Br query rows of one head and streams the key blocks its mask does
// not zero past them, keeping per row the running absolute row sum r, the normalizer
// d = max(r, 1) and the output O normalized by it:
//   S = scale · (Q Kⱼᵀ) ∘ Mⱼ,   r' = r + rowsum(|S|),   d' = max(r', 1),   O' = (d·O + S Vⱼ) / d'.
// It reuses the attention forward's tiles and pipeline (ForwardTraits, dense layout, no mask
// kind of its own): only the scores' treatment differs from softmax.
#include "attention/fa2/forward_traits.cuh"
#include "attention/fa2/query_operand.cuh"
#include "attention/parts/epilogue.cuh"
#include "multiscale/multiscale_mask.cuh"

namespace flashjit {

/// S = scale · S ∘ M for a warp's (rows, keys) tile of Q Kᵀ whose element (r, c) is query row0 +
/// r, key key0 + c.
template <class Mask, int Rows, int Cols>
FJ_DEVICE void apply_multiscale_mask(acc_tile<Rows, Cols>& s, const Mask& mask, float scale,
                                     int row0, int key0, int lane) {
  for_each_element(s, lane,
                   [&](int r, int c, float& x) { x *= scale * mask.at(row0 + r, key0 + c); });
}

/// The running statistics of a warp's query rows: r and d = max(r, 1).
template <int Rows>
struct MultiScaleNormalizer {
  row_vec<Rows> sum;   // r: Σ |S| over the keys seen
  row_vec<Rows> norm;  // d = max(r, 1)

  FJ_DEVICE MultiScaleNormalizer() {
    fill(sum, 0.0f);
    fill(norm, 1.0f);
  }

  /// Folds one block of S in: r and d grow, O = O·d / d' and S = S / d', so that O + S V is the
  /// output normalized by the new d' (the document's o_i = (d_{i−1}·o_{i−1} + t_i v_i) / d_i).
  template <int Cols, int HeadDim>
  FJ_DEVICE void update(acc_tile<Rows, Cols>& s, acc_tile<Rows, HeadDim>& o) {
    row_vec<Rows> block_sum;
    fill(block_sum, 0.0f);
    for_each_in_row(s, [&](int r, float x) { block_sum.v[r] += x < 0.0f ? -x : x; });
    quad_sum(block_sum);  // every lane of a row needs the whole row's d'
    row_vec<Rows> rescale, inverse;
#pragma unroll
    for (int r = 0; r < Rows / 16 * 2; ++r) {
      sum.v[r] += block_sum.v[r];
      const float next = sum.v[r] > 1.0f ? sum.v[r] : 1.0f;
      inverse.v[r] = 1.0f / next;
      rescale.v[r] = norm.v[r] * inverse.v[r];
      norm.v[r] = next;
    }
    mul_row(o, rescale);
    mul_row(s, inverse);
  }
};

/// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), block kThreads, dynamic shared memory
/// Traits::kSharedBytes. Writes O and, where params.rowsum is set, r per row.
template <class Traits, MultiScaleMaskKind Kind>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    multiscale_forward_kernel(MultiScaleParams params) {
  using T = typename Traits::Element;
  constexpr int kRows = Traits::kRowsPerWarp;
  const AttentionBackwardParams& p = params.attention;
  const int lane = threadIdx.x % kWarpSize;
  const int warp_row0 = threadIdx.x / kWarpSize * kRows;  // the warp's first row in the block
  const int row0 = int(blockIdx.x) * Traits::kBlockM;
  const int rows = min_int(Traits::kBlockM, p.seqlen_q - row0);
  if (rows <= 0) return;
  const int head = blockIdx.y, batch = blockIdx.z;
  const MultiScaleMask<Kind> mask(params, head);
  const BlockRange blocks = mask.key_blocks(row0, row0 + rows - 1, Traits::kBlockN);
  float* rowsum = params.rowsum == nullptr ? nullptr
                                           : params.rowsum + batch * params.rowsum_batch_stride +
                                                 head * params.rowsum_head_stride + row0;
  const HeadSlice<T> slice = head_slice<T>(p, p.o, rowsum, batch, head, row0);

  KeyValuePipeline<Traits> pipeline({slice, p.seqlen_k, Traits::kHeadDim},
                                    blocks.end);      // V as wide as Q
  QueryOperand<Traits> query(pipeline.q, warp_row0);  // Q, from shared memory or registers
  acc_tile<kRows, Traits::kHeadDimPadded> o;          // (kRows, kHeadDimPadded), normalized by d
  fill(o, 0.0f);
  MultiScaleNormalizer<kRows> normalizer;  // r, d
  if (!blocks.empty()) pipeline.start(rows, blocks.begin);
  for (int block_n = blocks.begin; block_n < blocks.end; ++block_n) {
    const int key0 = block_n * Traits::kBlockN;
    acc_tile<kRows, Traits::kBlockN> s;  // (kRows, kBlockN) scores
    fill(s, 0.0f);
    const auto keys = pipeline.await_keys(block_n);
    if (block_n == blocks.begin) query.arrived(lane);  // Q came with the first key block
    query.scores(s, keys, lane);                       // Q Kᵀ
    apply_multiscale_mask(s, mask, p.scale, row0 + warp_row0, key0, lane);  // S = scale·QKᵀ ∘ M
    normalizer.update(s, o);  // r, d' = max(r, 1); O = O·d/d', S = S/d'
    mma_ab(o, to_operand<T>(s), pipeline.await_values(block_n), lane);  // O += S V / d'
  }
  store_rows<Traits::kHeadDim>(o, pipeline.q, slice.out, slice.out_row_stride, warp_row0, rows,
                               lane);
  store_lse(normalizer.sum, slice.lse, warp_row0, rows, lane);  // r, where asked for
}

}  // namespace flashjit
