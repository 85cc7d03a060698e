#pragma once
// One specialization of the warp-specialized Hopper backward (tma_backward_kernel.cuh): its
// compile-time constants, the tensor maps it takes, and the shared memory it carves.
#include "attention/hopper/tma_backward_space.cuh"
#include "attention/parts/backward_params.cuh"
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/modifiers.cuh"
#include "attention/parts/row_stats.cuh"
#include "tile/pipeline_ring.cuh"
#include "tile/register_budget.cuh"
#include "tile/shared_tile.cuh"
#include "tile/swizzled_tile.cuh"

namespace flashjit {

/// The tensor maps of Q, K, V and dO (kernel parameters), each as AttentionTmaMaps describes a
/// map (tma_forward_traits.cuh): rank 4 over {head_dim, seqlen, heads, batch}, 128-byte swizzle,
/// boxes of 64 head-dim elements by Br rows (Q, dO) or Bc rows (K, V); and of the row
/// statistics (AttentionBackwardParams::row_stats): rank 2 over {kRowStatFloats, blocks}, no
/// swizzle, one block a box.
struct AttentionBackwardTmaMaps {
  tma_descriptor q;
  tma_descriptor k;
  tma_descriptor v;
  tma_descriptor dout;
  tma_descriptor row_stats;
};

template <typename Element_, int HeadDim, int BlockN, MaskKind Mask, bool Softcap, int Stages = 2,
          bool Deterministic = false, bool Varlen = false, bool SharedKeys = false,
          class Modifiers_ = NoModifiers, int BlockM = 64 /* kTmaBackwardBlockM */>
struct TmaBackwardTraits {
  static_assert(tma_backward_valid(HeadDim, BlockN, Stages, SharedKeys, Deterministic, BlockM),
                "invalid TMA backward traits: see tma_backward_valid (head dim 64 to 256 in "
                "multiples of 8, Bc 64 or 128, shared keys above 128, one or two stages, Br 64 "
                "or 128 at head dim 64, within 227 KB of shared memory)");
  using Element = Element_;  // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = tma_forward_padded_head_dim(HeadDim);
  static constexpr int kBlockM = BlockM;  // Br: query rows per streamed block
  static constexpr int kBlockN = BlockN;  // Bc: keys per CTA, 64 per warpgroup
  static constexpr int kStages = Stages;  // Q and dO slots
  // Two consumer warpgroups on the same 64 keys (tma_backward_consumer_groups), each computing
  // the scores of half the query rows and one of dK and dV; else each on 64 keys of its own.
  static constexpr bool kSharedKeys = SharedKeys;
  static constexpr int kGroups = tma_backward_consumer_groups(BlockN, SharedKeys);
  static constexpr int kConsumerThreads = kGroups * 128;
  static constexpr int kThreads = tma_backward_threads(BlockN, SharedKeys);  // then the producer
  static constexpr int kStagingBlocks =
      tma_backward_staging_blocks(HeadDim, BlockN, Stages, SharedKeys);
  // dQ's sums from the consumers' registers, without staging or writer warp (atomic mode only).
  static constexpr bool kDqFromRegisters =
      tma_backward_dq_from_registers(HeadDim, BlockN, Stages, SharedKeys);
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  // dQ's sums into each query block in a fixed order (AttentionBackwardParams::dq_semaphore):
  // the same bits on every run.
  static constexpr bool kDeterministic = Deterministic;
  // A query block's turn counter is its first row's (of Br / kDqSemaphoreRows), and its row
  // statistics Br / kRowStatRows blocks.
  static_assert(kBlockM % kDqSemaphoreRows == 0, "whole turn counters per streamed query block");
  static_assert(kBlockM % kRowStatRows == 0, "whole blocks of row statistics per query block");
  static constexpr int kStatFloats = kBlockM / kRowStatRows * kRowStatFloats;  // a slot's
  // A variable-length batch (AttentionBackwardParams::sequences): each CTA rebases the params to
  // its sequence, and TMA reads the packed tensors from the sequence's first row.
  static constexpr bool kVarlen = Varlen;
  // the caller's score and mask modifiers (attention/parts/modifiers.cuh)
  using Modifiers = Modifiers_;
  static_assert(!Modifiers::kDropout, "dropout runs on the mma.sync kernels (attention/fa2/)");
  // setmaxnreg's counts (0: none), as the forward's with as many consumer warpgroups.
  static constexpr int kConsumerRegisters = tma_forward_registers(kGroups * 64).consumer;
  static constexpr int kProducerRegisters = tma_forward_registers(kGroups * 64).producer;

  using QTile = swizzled_tile<Element, kBlockM, kHeadDimPadded>;  // Q and dO as TMA wrote them
  using KVTile = swizzled_tile<Element, BlockN, kHeadDimPadded>;  // K and V; dK, dV at the end
  using ScoreTile = swizzled_tile<Element, BlockN, kBlockM>;      // dSᵀ, Pᵀ: keys by queries
  using Ring = PipelineRing<Stages>;                              // the Q and dO slots
  static constexpr int kSharedBytes =
      tma_backward_shared_bytes(HeadDim, BlockN, Stages, SharedKeys, BlockM);
};

/// The kernel's shared memory, carved from the dynamic buffer. A slot of the ring holds one
/// query block's Q and dO, loaded together on the slot's full barrier. Slot s's tiles are
/// computed from slot 0's.
template <class Traits>
struct TmaBackwardShared {
  using QTile = typename Traits::QTile;
  typename Traits::KVTile k, v;     // (Bc, d): the CTA's keys and values
  QTile q0, dout0;                  // (Br, d): slot 0 of Q and of dO
  typename Traits::ScoreTile ds_t;  // (Bc, Br): dSᵀ, each warpgroup its own 64 key rows
  typename Traits::ScoreTile p_t;   // (Bc, Br): Pᵀ, with shared keys only (else unset)
  float* stats0;                    // slot 0 of the row statistics (stats())
  float* dq_staging;                // Traits::kStagingBlocks of (Br, head_dim) fp32, row-major
  mbarrier_t* kv_full;              // K and V have landed
  typename Traits::Ring ring;       // Q and dO slots: full and empty barriers

  FJ_DEVICE QTile q(int stage) const { return {q0.data + stage * QTile::kBytes / 2}; }
  FJ_DEVICE QTile dout(int stage) const { return {dout0.data + stage * QTile::kBytes / 2}; }
  /// Slot `stage`'s row statistics: Br / 64 blocks, each its 64 rows' LSEs in base 2, then
  /// their Ds.
  FJ_DEVICE float* stats(int stage) const { return stats0 + stage * Traits::kStatFloats; }
  /// Staging block `block` (a consumer warpgroup's; with shared keys only block 0).
  FJ_DEVICE float* dq_block(int block) const {
    return dq_staging + block * Traits::kBlockM * Traits::kHeadDim;
  }
};

template <class Traits>
FJ_DEVICE TmaBackwardShared<Traits> carve_tma_backward_shared(unsigned char* base) {
  using QTile = typename Traits::QTile;
  base = align_swizzle_atom(base);  // swizzled tiles (all multiples of 1024 bytes) first
  TmaBackwardShared<Traits> smem;
  smem.k = carve_tile<typename Traits::KVTile>(base);
  smem.v = carve_tile<typename Traits::KVTile>(base);
  smem.q0 = QTile{reinterpret_cast<typename Traits::Element*>(base)};
  base += Traits::kStages * QTile::kBytes;
  smem.dout0 = QTile{reinterpret_cast<typename Traits::Element*>(base)};
  base += Traits::kStages * QTile::kBytes;
  smem.ds_t = carve_tile<typename Traits::ScoreTile>(base);
  if constexpr (Traits::kSharedKeys) smem.p_t = carve_tile<typename Traits::ScoreTile>(base);
  smem.stats0 = reinterpret_cast<float*>(base);  // 128-byte aligned, as a TMA box must be
  base += Traits::kStages * Traits::kStatFloats * 4;
  smem.dq_staging = reinterpret_cast<float*>(base);
  base += Traits::kStagingBlocks * Traits::kBlockM * Traits::kHeadDim * 4;
  smem.kv_full = reinterpret_cast<mbarrier_t*>(base);
  smem.ring = typename Traits::Ring{smem.kv_full + 1};
  return smem;
}

}  // namespace flashjit
