#pragma once
// Multi-scale attention backward, dQ (and a mask tensor's dM): one CTA owns Br query rows of one
// head and streams the key blocks its mask does not zero past them, as the forward does,
// recomputing S = scale · Q Kⱼᵀ and dP = dO Vⱼᵀ: dQ = Σⱼ (scale · dA ∘ M) Kⱼ
// (attention/fa2/backward_dq_kernel.cuh with multi-scale attention's element-wise step). dM sums
// over the batch; one CTA then owns its rows for every sequence, in order, so the sum has the same
// bits on every run.
#include "attention/fa2/backward_traits.cuh"
#include "attention/fa2/key_value_pipeline.cuh"
#include "attention/parts/epilogue.cuh"
#include "multiscale/multiscale_gradients.cuh"
#include "tile/gemm.cuh"

namespace flashjit {

/// dQ of rows [row0, row0 + rows) of (batch, head), and their dM added (`first`: stored) when
/// params.dmask is set.
template <class Traits, MultiScaleMaskKind Kind>
FJ_DEVICE void multiscale_query_gradients(const MultiScaleParams& params,
                                          const MultiScaleMask<Kind>& mask, BlockRange blocks,
                                          int batch, int head, int row0, int rows, bool first) {
  using T = typename Traits::Element;
  using Pipeline = KeyValuePipeline<Traits>;
  constexpr int kRows = Traits::kQueryRowsPerWarp;
  const AttentionBackwardParams& p = params.attention;
  const int lane = threadIdx.x % kWarpSize;
  const int warp_row0 = threadIdx.x / kWarpSize * kRows;
  const HeadSlice<T> slice = head_slice<T>(p, p.dq, nullptr, batch, head, row0);
  Pipeline pipeline({slice, p.seqlen_k, Traits::kHeadDim}, blocks.end);  // V as wide as Q
  unsigned char* after_pipeline = dynamic_shared<unsigned char>() + Pipeline::kBytes;
  const auto dout = carve_tile<typename Pipeline::QTile>(after_pipeline);  // (kBlockM, d)
  MultiScaleRowStats stats[kRows / 16 * 2];
#pragma unroll
  for (int slot = 0; slot < kRows / 16 * 2; ++slot) {
    const int row = warp_row0 + fragment_row(slot / 2, slot % 2, lane);
    stats[slot] = row < rows ? MultiScaleRowStats::load(p, batch, head, row0 + row)
                             : MultiScaleRowStats{0.0f, 0.0f};
  }
  float* dmask = params.dmask == nullptr ? nullptr
                                         : params.dmask + head * params.dmask_head_stride +
                                               row0 * params.dmask_row_stride;
  acc_tile<kRows, Traits::kHeadDimPadded> dq;  // (kRows, d)
  fill(dq, 0.0f);
  if (!blocks.empty()) {
    load_tile_async<Traits::kThreads>(dout, p.dout.rows<const T>(batch, head, row0),
                                      p.dout.row_stride, rows, Traits::kHeadDim, int(threadIdx.x));
    pipeline.start(rows, blocks.begin);  // dO joins the first commit group
  }
  for (int block = blocks.begin; block < blocks.end; ++block) {
    const int key0 = block * Traits::kBlockN;
    const auto k = pipeline.await_keys(block);
    acc_tile<kRows, Traits::kBlockN> s, ds;  // (kRows, kBlockN): scale·Q Kᵀ; dP, then dS
    fill(s, 0.0f);
    fill(ds, 0.0f);
    mma_abt(s, pipeline.q, warp_row0, k, lane);                        // Q Kᵀ
    mma_abt(ds, dout, warp_row0, pipeline.await_values(block), lane);  // dP = dO Vᵀ
#pragma unroll
    for (int i = 0; i < s.kSlabs; ++i)
#pragma unroll
      for (int g = 0; g < s.kGroups; ++g)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = warp_row0 + fragment_row(i, e / 2, lane);
          const int key = key0 + fragment_col(g, e % 2, lane);
          const float score = s.frag[i][g][e] * p.scale;
          const float m = row < rows ? mask.at(row0 + row, key) : 0.0f;
          const float da =
              multiscale_score_gradient(score, m, ds.frag[i][g][e], stats[2 * i + e / 2], p.scale);
          if (dmask != nullptr && row < rows && key < p.seqlen_k) {
            const index_t at = index_t(row) * params.dmask_row_stride + key;
            store_global(dmask, at, (first ? 0.0f : load_global(dmask, at)) + da * score);
          }
        }
    mma_ab(dq, to_operand<T>(ds), k, lane);  // dQ += dS K
  }
  store_rows<Traits::kHeadDim>(dq, pipeline.q, slice.out, slice.out_row_stride, warp_row0, rows,
                               lane);
}

/// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), or (…, heads_q, 1) with a mask gradient (each
/// CTA then walks the batch); block kThreads, dynamic shared memory Traits::kSharedBytes.
template <class Traits, MultiScaleMaskKind Kind>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    multiscale_backward_dq_kernel(MultiScaleParams params) {
  const AttentionBackwardParams& p = params.attention;
  const int row0 = int(blockIdx.x) * Traits::kBlockM;
  const int rows = min_int(Traits::kBlockM, p.seqlen_q - row0);
  if (rows <= 0) return;
  const int head = blockIdx.y;
  const MultiScaleMask<Kind> mask(params, head);
  const BlockRange blocks = mask.key_blocks(row0, row0 + rows - 1, Traits::kBlockN);
  const bool whole_batch = params.dmask != nullptr;
  const int first = whole_batch ? 0 : int(blockIdx.z);
  const int end = whole_batch ? p.batch : first + 1;
  for (int batch = first; batch < end; ++batch) {
    if (batch != first) __syncthreads();  // every warp is done with the last sequence's tiles
    multiscale_query_gradients<Traits>(params, mask, blocks, batch, head, row0, rows,
                                       batch == first);
  }
}

}  // namespace flashjit
