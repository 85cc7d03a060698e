#pragma once
// The warp-specialized Hopper forward (sm_90a), FlashAttention-3's structure (HOPPER-NOTES
// 1.2): one producer warp whose lane 0 issues TMA loads, Q once on its own mbarrier, then K and
// V block by block into a ring of Stages slots; one or two consumer warpgroups of 64 query rows
// each wait for a full slot, compute S = Q Kᵀ (SS) and O += P V (RS, P from registers) on
// wgmma straight from the swizzled tiles TMA wrote, and release the slot. Softmax, mask and
// softcap are the other forward kernels'.
//
// O leaves as FlashAttention-3's does: each warpgroup writes its rows into its own rows of Q's
// tile (only its own, finished, wgmmas read them) and one of its threads stores them with TMA,
// which skips rows past seqlen_q and columns past the head dim.
//
// Not done yet (FlashAttention-3 has them): setmaxnreg, the softmax overlapped with the next
// block's products within a warpgroup and pingpong between warpgroups, cache hints, clusters
// and multicast, persistent scheduling.
#include "attention/epilogue.cuh"
#include "attention/forward_params.cuh"
#include "attention/forward_softmax.cuh"
#include "attention/head_tensor.cuh"
#include "attention/mask.cuh"
#include "attention/tma_forward_traits.cuh"

namespace flashjit {

/// Where one CTA works: its query block, (batch, head), and the key blocks it visits.
struct TmaForwardBlock {
  int row0;  // the block's first query row
  int rows;  // valid query rows in the block
  int head, kv_head, batch;
  BlockRange keys;
};

/// This CTA's block: query rows blockIdx.x · kBlockM on, head blockIdx.y, batch blockIdx.z.
template <class Traits>
FJ_DEVICE TmaForwardBlock tma_forward_block(const AttentionForwardParams& params) {
  const int row0 = int(blockIdx.x) * Traits::kBlockM, head = int(blockIdx.y);
  const int rows = min_int(Traits::kBlockM, params.seqlen_q - row0);
  const KeyWindow<Traits::kMask> window(params);
  return {row0,
          rows,
          head,
          head / params.heads_per_kv,
          int(blockIdx.z),
          window.key_blocks(row0, row0 + rows - 1, Traits::kBlockN)};
}

/// Producer (one thread): Q once, then each key block's K and V into the next free slot.
template <class Traits>
FJ_DEVICE void load_query_keys_values(const TmaForwardShared<Traits>& smem,
                                      const AttentionTmaMaps& maps, const TmaForwardBlock& at) {
  if (at.keys.empty()) return;  // nothing to attend to: the consumers wait for nothing
  const int q_origin[4] = {0, at.row0, at.head, at.batch};  // (dim, row, head, batch)
  mbarrier_arrive_expect_tx(smem.q_full, Traits::QTile::kBytes);
  tma_load_tile(smem.q, maps.q, q_origin, smem.q_full);  // Q
  RingPosition<Traits::kStages> slot;
  for (int block = at.keys.begin; block < at.keys.end; ++block, slot.advance()) {
    mbarrier_t* full = smem.ring.acquire(slot, 2 * Traits::KVTile::kBytes);  // empty slot
    const int kv_origin[4] = {0, block * Traits::kBlockN, at.kv_head, at.batch};
    tma_load_tile(smem.k(slot.stage), maps.k, kv_origin, full);  // K
    tma_load_tile(smem.v(slot.stage), maps.v, kv_origin, full);  // V
  }
}

/// A consumer warpgroup's epilogue: this warp's rows of O into the warpgroup's rows of Q's tile,
/// then one TMA store of the warpgroup's 64 rows (tma_store_rows).
template <class Traits>
FJ_DEVICE void store_output(const acc_tile<16, Traits::kHeadDimPadded>& o,
                            const TmaForwardShared<Traits>& smem, const AttentionTmaMaps& maps,
                            const TmaForwardBlock& at, int thread) {
  const int group = thread / 128, group_row0 = group * 64;
  store_fragments(o, smem.q, thread / kWarpSize * 16, thread % kWarpSize);
  fence_proxy_async();                 // generic writes, read by the async proxy
  named_barrier_sync(1 + group, 128);  // the warpgroup's 64 rows are written
  if (thread % 128 != 0 || group_row0 >= at.rows) return;
  const int origin[4] = {0, at.row0 + group_row0, at.head, at.batch};
  tma_store_rows<kTmaStoreRows>(maps.o, origin, smem.q, group_row0);
  bulk_commit_group();
  bulk_wait_group<0>();  // the block's shared memory lives until the store has read it
}

/// Consumer (a warpgroup's 128 threads): the online softmax over the key blocks, then O and LSE.
template <class Traits>
FJ_DEVICE void attend(const TmaForwardShared<Traits>& smem, const AttentionForwardParams& params,
                      const AttentionTmaMaps& maps, const TmaForwardBlock& at, int thread) {
  using T = typename Traits::Element;
  const int lane = thread % kWarpSize;
  const int warp_row0 = thread / kWarpSize * 16;  // the warp's first row in the block
  const int group_row0 = thread / 128 * 64;       // its warpgroup's
  const int row0 = at.row0, last_row = at.row0 + at.rows - 1;
  const KeyWindow<Traits::kMask> window(params);
  const float scale = exponent_scale<Traits::kSoftcap>(params);

  acc_tile<16, Traits::kHeadDimPadded> o;  // (16, kHeadDimPadded): this warp's rows, unnormalized
  fill(o, 0.0f);
  OnlineSoftmax<16> softmax;                                   // m, ℓ
  if (!at.keys.empty()) mbarrier_wait_parity(smem.q_full, 0);  // Q landed
  RingPosition<Traits::kStages> slot;
  for (int block = at.keys.begin; block < at.keys.end; ++block, slot.advance()) {
    const int key0 = block * Traits::kBlockN;
    smem.ring.wait(slot);  // K, V landed

    acc_tile<16, Traits::kBlockN> s;                           // (16, kBlockN) scores
    warpgroup_abt(s, smem.q, group_row0, smem.k(slot.stage));  // S = Q Kᵀ
    cap_scores<Traits::kSoftcap>(s, params);
    if (!window.block_fully_visible(row0, last_row, key0, Traits::kBlockN)) {
      mask_scores(window, s, row0 + warp_row0, key0, lane);  // S = −inf where masked
    }
    softmax.update(s, o, scale);                            // P = 2^((S − m)·c), O·α
    warpgroup_ab(o, to_operand<T>(s), smem.v(slot.stage));  // O += P V
    smem.ring.release(slot);                                // slot free
  }
  const row_vec<16> lse = softmax.finish(o, scale);  // O /= ℓ
  store_output<Traits>(o, smem, maps, at, thread);
  store_lse(lse, lse_rows(params, at.batch, at.head, row0), warp_row0, at.rows, lane);
}

/// Grid (ceil(seqlen_q / kBlockM), heads_q, batch), block Traits::kThreads (the consumer
/// warpgroups, then the producer warpgroup), dynamic shared memory Traits::kSharedBytes; `maps`
/// as AttentionTmaMaps documents.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    attention_forward_tma_kernel(AttentionForwardParams params,
                                 const FJ_GRID_CONSTANT AttentionTmaMaps maps) {
  const int thread = threadIdx.x;
  const TmaForwardBlock at = tma_forward_block<Traits>(params);
  const TmaForwardShared<Traits> smem =
      carve_tma_forward_shared<Traits>(dynamic_shared<unsigned char>());
  if (thread == 0) {
    mbarrier_init(smem.q_full, 1);
    smem.ring.init(Traits::kConsumerThreads);  // every consumer thread releases each slot
  }
  __syncthreads();  // the barriers are initialised

  if (thread < Traits::kConsumerThreads) {
    attend<Traits>(smem, params, maps, at, thread);
  } else if (thread == Traits::kConsumerThreads) {  // the producer warpgroup's first thread
    load_query_keys_values<Traits>(smem, maps, at);
  }
}

}  // namespace flashjit
