#pragma once
// Backward, dK and dV (DESIGN.md section 1): one CTA owns Bc keys of one key/value head, holds
// Kⱼ and Vⱼ in shared memory and streams past them every query block that sees them, of every
// query head that shares them (GQA sums those heads' contributions in registers):
//   Pᵀ = 2^(K Qᵢᵀ − LSE),  dV += Pᵀ dOᵢ,  dSᵀ = Pᵀ ∘ (V dOᵢᵀ − D),  dK += scale · dSᵀ Qᵢ.
// Tiles are transposed (rows are keys) so each warp owns key rows, as the forward pass's warps
// own query rows. dK and dV are written once, without atomics.
#include "attention/backward_scores.cuh"
#include "attention/backward_traits.cuh"
#include "attention/epilogue.cuh"
#include "attention/mask.cuh"
#include "tile/gemm.cuh"

namespace flashjit {

/// The CTA's shared memory: its keys and values, and the query block streamed past them.
template <class Traits>
struct QueryStream {
  using T = typename Traits::Element;
  using KeyTile = smem_tile<T, Traits::kBlockN, Traits::kHeadDimPadded>;
  using QueryTile = smem_tile<T, Traits::kBlockM, Traits::kHeadDimPadded>;

  KeyTile k, v;       // (kBlockN, d)
  QueryTile q, dout;  // (kBlockM, d)
  float* lse;         // (kBlockM,) base 2; +inf for rows past the end
  float* delta;       // (kBlockM,) D; 0 for rows past the end

  FJ_DEVICE QueryStream() {
    unsigned char* base = dynamic_shared<unsigned char>();
    k = carve_tile<KeyTile>(base);
    v = carve_tile<KeyTile>(base);
    q = carve_tile<QueryTile>(base);
    dout = carve_tile<QueryTile>(base);
    lse = reinterpret_cast<float*>(base);
    delta = lse + Traits::kBlockM;
  }

  /// Starts loading this CTA's `keys` valid key and value rows (they join the first query
  /// block's commit group).
  FJ_DEVICE void load_keys(const T* k_rows, index_t k_stride, const T* v_rows, index_t v_stride,
                           int keys) {
    load_tile_async<Traits::kThreads>(k, k_rows, k_stride, keys, Traits::kHeadDim, threadIdx.x);
    load_tile_async<Traits::kThreads>(v, v_rows, v_stride, keys, Traits::kHeadDim, threadIdx.x);
  }

  /// Loads query block `block` of `head` (Q, dO, LSE, D) and waits until every thread sees it.
  FJ_DEVICE void load_queries(const AttentionBackwardParams& p, int batch, int head, int block) {
    const int row0 = block * Traits::kBlockM;
    const int rows = min_int(Traits::kBlockM, p.seqlen_q - row0);
    load_tile_async<Traits::kThreads>(q, p.q.rows<const T>(batch, head, row0), p.q.row_stride, rows,
                                      Traits::kHeadDim, threadIdx.x);
    load_tile_async<Traits::kThreads>(dout, p.dout.rows<const T>(batch, head, row0),
                                      p.dout.row_stride, rows, Traits::kHeadDim, threadIdx.x);
    cp_async_commit();
    const float* lse_in = lse_rows(p, batch, head, row0);
    const float* delta_rows = p.delta + (index_t(batch) * p.heads_q + head) * p.seqlen_q + row0;
    for (int row = threadIdx.x; row < Traits::kBlockM; row += Traits::kThreads) {
      const bool valid = row < rows;
      store_shared(lse, row, valid ? lse_base2(load_global(lse_in, row)) : -negative_infinity());
      store_shared(delta, row, valid ? load_global(delta_rows, row) : 0.0f);
    }
    cp_async_wait<0>();
    __syncthreads();
  }
};

/// Grid (ceil(seqlen_k / kBlockN), heads_kv, batch), block kThreads, dynamic shared memory
/// Traits::kSharedBytes. Writes dK, dV or both (Traits::kGradients).
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    attention_backward_dkdv_kernel(AttentionBackwardParams params) {
  static_assert(!Traits::kWantDk || !Traits::kWantDv ||
                    !attention_backward_space::split_key_gradients(Traits::kHeadDim),
                "head dims over 64 compute dK and dV in two launches (KeyGradients dk, dv)");
  using T = typename Traits::Element;
  constexpr int kRows = Traits::kKeyRowsPerWarp;
  constexpr int kD = Traits::kHeadDimPadded;
  const int lane = threadIdx.x % kWarpSize;
  const int warp_row0 = threadIdx.x / kWarpSize * kRows;  // the warp's first key in the block
  const int key0 = int(blockIdx.x) * Traits::kBlockN;
  const int keys = min_int(Traits::kBlockN, params.seqlen_k - key0);
  const int kv_head = blockIdx.y, batch = blockIdx.z;
  auto at = [&](const HeadTensor& t) { return t.rows<T>(batch, kv_head, key0); };  // key0's row
  const KeyWindow<Traits::kMask> window(params);
  const BlockRange blocks =
      window.query_blocks(key0, key0 + keys - 1, Traits::kBlockM, params.seqlen_q);

  QueryStream<Traits> stream;
  // Keys no query sees are not loaded: their dK and dV are exactly zero, and the tiles are
  // free for staging them at once.
  if (!blocks.empty()) {
    stream.load_keys(at(params.k), params.k.row_stride, at(params.v), params.v.row_stride, keys);
  }
  acc_tile<kRows, kD> dk, dv;  // (kRows, d) each
  fill(dk, 0.0f);
  fill(dv, 0.0f);
  const int first_head = kv_head * params.heads_per_kv;
  for (int head = first_head; head < first_head + params.heads_per_kv && !blocks.empty(); ++head) {
    for (int block = blocks.begin; block < blocks.end; ++block) {
      const int row0 = block * Traits::kBlockM;
      const int rows = min_int(Traits::kBlockM, params.seqlen_q - row0);
      stream.load_queries(params, batch, head, block);
      acc_tile<kRows, Traits::kBlockM> p_t;  // (kRows, kBlockM) scores, then probabilities
      fill(p_t, 0.0f);
      mma_abt(p_t, stream.k, warp_row0, stream.q, lane);  // Sᵀ = K Qᵀ
      ScoreScaling<Traits::kSoftcap, kRows, Traits::kBlockM> scaling;
      scaling.scale(p_t, params);  // Sᵀ·scale·log2 e
      if (!window.block_fully_visible(row0, row0 + rows - 1, key0, Traits::kBlockN)) {
        mask_scores_transposed(window, p_t, key0 + warp_row0, row0, lane);  // −inf where masked
      }
      for_each_element(p_t, lane, [&](int, int c, float& x) {
        x = exp2_approx(x - load_shared(stream.lse, c));  // Pᵀ = 2^(Sᵀ − LSE)
      });
      if constexpr (Traits::kWantDv) mma_ab<T>(dv, p_t, stream.dout, lane);  // dV += Pᵀ dO
      if constexpr (Traits::kWantDk) {
        acc_tile<kRows, Traits::kBlockM> ds_t;  // (kRows, kBlockM) dPᵀ, then dSᵀ
        fill(ds_t, 0.0f);
        mma_abt(ds_t, stream.v, warp_row0, stream.dout, lane);  // dPᵀ = V dOᵀ
        for_each_element(ds_t, lane,
                         [&](int, int c, float& x) { x -= load_shared(stream.delta, c); });
        mul_elements(ds_t, p_t);  // dSᵀ = Pᵀ ∘ (dPᵀ − D)
        scaling.chain(ds_t);
        mma_ab<T>(dk, ds_t, stream.q, lane);  // dK += dSᵀ Q
      }
      __syncthreads();  // every warp is done with this query block before the next loads
    }
  }
  // Each warp stages its own key rows in the K and V tiles, which only it reads.
  if constexpr (Traits::kWantDk) {
    scale_tile(dk, params.scale);
    store_rows<Traits::kHeadDim>(dk, stream.k, at(params.dk), params.dk.row_stride, warp_row0, keys,
                                 lane);
  }
  if constexpr (Traits::kWantDv) {
    store_rows<Traits::kHeadDim>(dv, stream.v, at(params.dv), params.dv.row_stride, warp_row0, keys,
                                 lane);
  }
}

}  // namespace flashjit
