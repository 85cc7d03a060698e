#pragma once
// The forward on Hopper's warpgroup MMA (sm_90a), a first version: FlashAttention-2's loop of
// forward_kernel.cuh with each 64 query rows owned by one warpgroup, S = Q Kᵀ read by wgmma
// straight from shared memory and O += P V with P from registers, so no ldmatrix feeds a
// product. Every thread loads K and V with cp.async, one block at a time; the producer warp
// with TMA and mbarriers, the multi-stage ring, the softmax overlapped with the next block's
// products and pingpong between warpgroups are FlashAttention-3's steps still to come.
#include "attention/hopper/wgmma_forward_traits.cuh"
#include "attention/parts/epilogue.cuh"
#include "attention/parts/forward_params.cuh"
#include "attention/parts/forward_softmax.cuh"
#include "attention/parts/head_tensor.cuh"
#include "attention/parts/mask.cuh"
#include "tile/warpgroup_scope.cuh"

namespace flashjit {

/// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), block kThreads, dynamic shared memory
/// Traits::kSharedBytes.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    attention_forward_wgmma_kernel(AttentionForwardParams params) {
  using T = typename Traits::Element;
  constexpr int kThreads = Traits::kThreads, kDim = Traits::kHeadDimPadded;
  const int thread = threadIdx.x;
  const WarpgroupScope scope{thread};
  const int lane = scope.lane();
  const int warp_row0 = scope.warp_row0();             // the warp's first row in the block
  const int group_row0 = scope.row0();                 // its warpgroup's
  const int row0 = int(blockIdx.x) * Traits::kBlockM;  // the block's first row
  const int rows = min_int(Traits::kBlockM, params.seqlen_q - row0);  // valid rows in the block
  const int head = blockIdx.y, batch = blockIdx.z;
  const HeadSlice<T> slice =
      head_slice<T>(params, params.o, lse_rows(params, batch, head, row0), batch, head, row0);
  const KeyWindow<Traits::kMask> window(params);
  const BlockRange blocks = window.key_blocks(row0, row0 + rows - 1, Traits::kBlockN);

  unsigned char* base = dynamic_shared<unsigned char>();
  const auto q = carve_tile<typename Traits::QTile>(base);          // (kBlockM, kDim)
  const auto k = carve_tile<typename Traits::KVTile>(base);         // (kBlockN, kDim)
  const auto v = carve_tile<typename Traits::KVTile>(base);         // (kBlockN, kDim)
  const auto o_staging = carve_tile<typename Traits::OTile>(base);  // (kBlockM, kDim)

  acc_tile<16, kDim> o;  // (16, kDim): this warp's rows of the unnormalized output
  fill(o, 0.0f);
  OnlineSoftmax<16> softmax;  // m, ℓ
  if (!blocks.empty()) {
    load_core_matrix_tile_async<kThreads>(q, slice.q, slice.q_row_stride, rows, Traits::kHeadDim,
                                          thread);
  }
  for (int block = blocks.begin; block < blocks.end; ++block) {
    const int key0 = block * Traits::kBlockN;
    load_core_matrix_tile_async<kThreads>(k, slice.k + key0 * slice.k_row_stride,
                                          slice.k_row_stride, params.seqlen_k - key0,
                                          Traits::kHeadDim, thread);
    load_core_matrix_tile_async<kThreads>(v, slice.v + key0 * slice.v_row_stride,
                                          slice.v_row_stride, params.seqlen_k - key0,
                                          params.head_dim_v, thread);
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();  // the loads wrote through the generic proxy; wgmma reads async
    __syncthreads();

    acc_tile<16, Traits::kBlockN> s;     // (16, kBlockN) scores, then probabilities
    warpgroup_abt(s, q, group_row0, k);  // S = Q Kᵀ
    cap_scores<Traits::kSoftcap>(s, params);
    if (!window.block_fully_visible(row0, row0 + rows - 1, key0, Traits::kBlockN)) {
      mask_scores(window, s, row0 + warp_row0, key0, lane);  // S = −inf where masked
    }
    softmax.update(s, o, exponent_scale<Traits::kSoftcap>(params));  // P = 2^((S − m)·c), O·α
    warpgroup_ab(o, to_operand<T>(s), v);                            // O += P V
    __syncthreads();  // every warpgroup is done with K and V before they are refilled
  }
  const row_vec<16> lse = softmax.finish(o, exponent_scale<Traits::kSoftcap>(params));  // O /= ℓ
  store_rows<Traits::kHeadDim>(o, o_staging, slice.out, slice.out_row_stride, warp_row0, rows, lane,
                               params.head_dim_v);
  store_lse(lse, slice.lse, warp_row0, rows, lane);
}

}  // namespace flashjit
