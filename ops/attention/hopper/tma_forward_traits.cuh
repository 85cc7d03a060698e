#pragma once
// One specialization of the warp-specialized Hopper forward (tma_forward_kernel.cuh): its
// compile-time constants, the tensor maps it takes, and the shared memory it carves.
#include "attention/hopper/tma_forward_space.cuh"
#include "attention/hopper/tma_tile_schedule.cuh"
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/modifiers.cuh"
#include "tile/e4m3.cuh"
#include "tile/pipeline_ring.cuh"
#include "tile/register_budget.cuh"
#include "tile/shared_tile.cuh"
#include "tile/swizzled_tile.cuh"

namespace flashjit {

/// The tensor maps of Q, K, V and O (cuTensorMapEncodeTiled, kernel parameters). Each is rank
/// 4, dimensions innermost first: {head_dim, seqlen, heads, batch} of that tensor (heads_q for Q
/// and O, heads_kv for K and V); byte strides {-, row_stride, head_stride, batch_stride} · 2
/// from its HeadTensor (so bshd and bhsd alike); 16-bit elements; box {64, BlockM (Q), BlockN
/// (K, V; BlockN / 2 in 2-CTA clusters, each CTA's share) or 64 (O, one warpgroup's rows), 1, 1};
/// CU_TENSOR_MAP_SWIZZLE_128B; interleave none, element strides 1, OOB fill none: rows past seqlen
/// and columns past head_dim load as zeros and are not stored. Global addresses 16-byte aligned,
/// strides multiples of 16 bytes (the driver's rules: tma_forward_strides_valid).
struct AttentionTmaMaps {
  tma_descriptor q;
  tma_descriptor k;
  tma_descriptor v;
  tma_descriptor o;
};

template <typename Element_, int HeadDim, int BlockM, int BlockN, MaskKind Mask, bool Softcap,
          int Stages = 2, bool Overlap = false, bool Pingpong = false, bool PShared = false,
          bool Persistent = false, bool Varlen = false, int ClusterBlocks = 1,
          class Modifiers_ = NoModifiers, bool KvE4m3 = false>
struct TmaForwardTraits {
  static_assert(tma_forward_valid(HeadDim, BlockM, BlockN, Stages, PShared, KvE4m3),
                "invalid TMA forward traits: see tma_forward_valid (head dim 64 to 256 in "
                "multiples of 8, of 16 with an fp8 cache, Br 64, 128 or 192, Bc a multiple of 16 "
                "up to 256 (of 64 with P "
                "in shared memory), everything within 227 KB of shared memory)");
  static_assert(tma_forward_schedule_valid(BlockM, Stages, Overlap, Pingpong),
                "overlap holds a slot across steps (two stages at least); pingpong takes turns "
                "between two consumer warpgroups (Br 128) and comes with overlap");
  static_assert(!(Varlen && Persistent),
                "a variable-length batch takes one CTA per tile (its tiles are uneven)");
  static_assert(tma_forward_cluster_valid(BlockN, ClusterBlocks, Mask != MaskKind::none, Persistent,
                                          Varlen),
                "clusters of two CTAs that share K and V: unmasked, one CTA per dense tile");
  static_assert(!KvE4m3 || (Varlen && ClusterBlocks == 1),
                "an fp8 cache comes with packed sequences (the inference forward's), one CTA "
                "per tile");
  using Element = Element_;  // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = tma_forward_padded_head_dim(HeadDim);
  static constexpr int kBlockM = BlockM;  // Br: 64 query rows per consumer warpgroup
  static constexpr int kBlockN = BlockN;  // Bc
  static constexpr int kStages = Stages;  // slots in each of the K and the V ring
  static constexpr int kConsumerThreads = BlockM / 64 * 128;
  static constexpr int kThreads = tma_forward_threads(BlockM);  // consumers, then the producer
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  static constexpr bool kOverlap = Overlap;    // the softmax under the next products
  static constexpr bool kPingpong = Pingpong;  // two warpgroups take turns at the products
  static constexpr bool kPShared = PShared;    // O += P V reads P from shared memory (SS)
  // One CTA per SM walks many tiles (TileSchedule); without, one CTA per tile.
  static constexpr bool kPersistent = Persistent;
  // Packed sequences (SequenceIndex's cu_seqlens): Q, K, V and O are [total, heads, head_dim]
  // (maps of batch 1), each tile finds its sequence's rows, and O leaves by bounded stores (a
  // TMA box would write into the next sequence).
  static constexpr bool kVarlen = Varlen;
  // CTAs of a cluster (1 or 2), consecutive query blocks of one (head, batch): each loads its
  // share of every K and V block and multicasts it to all (tma_forward_space.cuh).
  static constexpr int kClusterBlocks = ClusterBlocks;
  // the caller's score and mask modifiers (attention/parts/modifiers.cuh)
  using Modifiers = Modifiers_;
  static_assert(!Modifiers::kDropout, "dropout runs on the mma.sync kernels (attention/fa2/)");
  // K and V are an fp8 e4m3 cache: TMA brings their blocks as bytes into two staging slots and
  // the producer warpgroup converts each into its ring slot (tma_forward_loads.cuh); the
  // descale factors scale the scores and O in fp32.
  static constexpr bool kKvE4m3 = KvE4m3;
  static constexpr bool kQkE4m3 = false;  // Q and K are e4m3 (attention/fp8/fp8_tma_traits.cuh)
  // A score modifier leaves the scores in the base-2 domain, as softcap does.
  static constexpr bool kScaled = Softcap || Modifiers::kScore;
  // setmaxnreg's counts (0: none), each thread's registers after it.
  static constexpr TmaForwardRegisters kRegisters =
      tma_forward_registers(BlockM, ClusterBlocks, KvE4m3);
  static constexpr int kConsumerRegisters = kRegisters.consumer;
  static constexpr int kProducerRegisters = kRegisters.producer;

  using QTile = swizzled_tile<Element, BlockM, kHeadDimPadded>;   // as TMA wrote it; O too
  using KVTile = swizzled_tile<Element, BlockN, kHeadDimPadded>;  // K and V alike
  // P on its way to O += P V when PShared (a placeholder of one panel otherwise, never carved).
  using PTile = swizzled_tile<Element, BlockM, PShared ? BlockN : 64>;
  using Ring = PipelineRing<Stages>;  // one for K, one for V
  // An fp8 cache's staging slots, as a TMA box without swizzle writes them (row-major bytes).
  using StagingTile = e4m3_tile<BlockN, kHeadDimPadded>;
  using StagingRing = PipelineRing<2>;  // its two slots: TMA fills them, the warpgroup frees them
  // Q's slots: two where a persistent CTA has room (tma_forward_q_slots), tile n in slot n % 2.
  static constexpr int kQSlots =
      tma_forward_q_slots(HeadDim, BlockM, BlockN, Stages, PShared, KvE4m3, Persistent);
  static constexpr int kSharedBytes =
      tma_forward_shared_bytes(HeadDim, BlockM, BlockN, Stages, PShared, KvE4m3, kQSlots);
};

/// The kernel's shared memory, carved from the dynamic buffer. K and V have rings of their
/// own, so that a K slot is free again as soon as S = Q Kᵀ has read it (FlashAttention-3's
/// separate pipelines): the next blocks' K loads then run ahead of the math instead of waiting
/// for P V. The rings' slots are computed from slot 0 (not an array of tiles: indexing one by
/// the run-time stage would put it on the stack).
template <class Traits>
struct TmaForwardShared {
  using KVTile = typename Traits::KVTile;
  using QTile = typename Traits::QTile;
  // Q's slot 0, or with for_tile the tile's slot: (kBlockM, kHeadDimPadded), Q, then O on its
  // way out; with two slots, slot 1 follows it, and its barriers lie kSecondQBarriers past
  // slot 0's.
  QTile q;
  KVTile k0, v0;                 // (kBlockN, kHeadDimPadded): slot 0 of K and of V
  typename Traits::PTile p;      // (kBlockM, kBlockN): P, when it goes through shared memory
  mbarrier_t* q_full;            // Q has landed
  mbarrier_t* q_empty;           // the consumers' O has left Q's slot
  typename Traits::Ring k_ring;  // K slots: full and empty barriers
  typename Traits::Ring v_ring;  // V slots
  mbarrier_t* v_tail;            // packed: a V block read past the last sequence has landed
  TileHandOver handed;           // TileSchedule::kDynamic: the taken tiles' slots
  typename Traits::StagingTile staging0;      // an fp8 cache's staging slot 0 (slot 1 after it)
  typename Traits::StagingRing staging_ring;  // an fp8 cache: the staging slots' barriers

  // Barrier-sized (8-byte) units from q_full to the hand-over (carve_tma_forward_shared): past
  // Q's two barriers, the K and V rings', V's tail and an fp8 cache's staging ring's, rounded up
  // to 16 bytes.
  static constexpr int kHandOverAt =
      (3 + 4 * Traits::kStages + (Traits::kKvE4m3 ? 4 : 0) + 1) / 2 * 2;
  // Barriers from slot 0's to slot 1's: past the hand-over (16 bytes more in the shared bytes).
  static constexpr int kSecondQBarriers = kHandOverAt + TileHandOver::kBytes / 8;

  /// This view with the CTA's n-th tile's Q slot (and its barriers) as q: slot n % kQSlots.
  FJ_DEVICE TmaForwardShared for_tile(int n) const {
    if constexpr (Traits::kQSlots == 1) {
      return *this;
    } else {
      static_assert(Traits::kQSlots == 2, "Q has one or two slots");
      TmaForwardShared view = *this;
      const int slot = n & 1;
      view.q = QTile{q.data + slot * QTile::kBytes / 2};
      view.q_full = q_full + slot * kSecondQBarriers;
      view.q_empty = q_empty + slot * kSecondQBarriers;
      return view;
    }
  }

  FJ_DEVICE KVTile k(int stage) const { return {k0.data + stage * KVTile::kBytes / 2}; }
  FJ_DEVICE KVTile v(int stage) const { return {v0.data + stage * KVTile::kBytes / 2}; }
  FJ_DEVICE typename Traits::StagingTile staging(int slot) const {
    return {staging0.data + slot * Traits::StagingTile::kBytes};
  }
};

template <class Traits>
FJ_DEVICE TmaForwardShared<Traits> carve_tma_forward_shared(unsigned char* base) {
  using KVTile = typename Traits::KVTile;
  base = align_swizzle_atom(base);  // swizzled tiles (all multiples of 1024 bytes) first
  TmaForwardShared<Traits> smem;
  smem.q = carve_tile<typename Traits::QTile>(base);
  if constexpr (Traits::kQSlots == 2) base += Traits::QTile::kBytes;  // slot 1 (for_tile)
  smem.k0 = KVTile{reinterpret_cast<typename Traits::Element*>(base)};
  base += Traits::kStages * KVTile::kBytes;
  smem.v0 = KVTile{reinterpret_cast<typename Traits::Element*>(base)};
  base += Traits::kStages * KVTile::kBytes;
  if constexpr (Traits::kPShared) smem.p = carve_tile<typename Traits::PTile>(base);
  if constexpr (Traits::kKvE4m3) {
    smem.staging0 = {base};  // (1024-byte aligned: every tile before it is whole atoms)
    base += 2 * Traits::StagingTile::kBytes;
  }
  smem.q_full = reinterpret_cast<mbarrier_t*>(base);
  smem.q_empty = smem.q_full + 1;
  smem.k_ring = typename Traits::Ring{smem.q_full + 2};
  smem.v_ring = typename Traits::Ring{smem.q_full + 2 + 2 * Traits::kStages};
  smem.v_tail = smem.q_full + 2 + 4 * Traits::kStages;
  smem.staging_ring = typename Traits::StagingRing{smem.v_tail + 1};
  // The hand-over 16-byte aligned (its barriers 8 bytes past the last ring's, or 16: every
  // barrier's offset from q_full, 1024-byte aligned, is a multiple of 8), after the staging
  // ring's barriers, which tma_forward_shared_bytes counts with an fp8 cache only.
  static_assert(TileHandOver::kBytes == 64, "tma_forward_shared_bytes counts 64 + 8 bytes");
  smem.handed = TileHandOver{{smem.q_full + TmaForwardShared<Traits>::kHandOverAt}};
  return smem;
}

}  // namespace flashjit
