#pragma once
// One specialization of the fp8 forward on sm_90a's TMA and wgmma (fp8_tma_kernel.cuh) and the
// shared memory it carves (its space: fp8_tma_space.cuh).
//
// wgmma takes e4m3 operands K-major only. Q and K are K-major as they are stored (the head dim
// is their k), so TMA brings them straight into 128-byte-swizzled tiles, two codes an element
// (e4m3x2_t: a 16-bit tile's image, 128 codes a line). V is not: P V's k is the keys, so the
// producer warpgroup transposes each V block into Vᵀ (fp8_tma_loads.cuh).
#include "attention/fp8/fp8_tma_space.cuh"
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/modifiers.cuh"
#include "tile/e4m3.cuh"
#include "tile/pipeline_ring.cuh"
#include "tile/register_budget.cuh"
#include "tile/swizzled_tile.cuh"
#include "tile/wgmma_e4m3.cuh"

namespace flashjit {

template <int HeadDim, int BlockM, MaskKind Mask, bool Softcap, bool Pingpong = false>
struct Fp8TmaTraits {
  static_assert(fp8_tma_space::config_valid(HeadDim, BlockM, fp8_tma_space::kBlockN,
                                            tma_forward_threads(BlockM) / 32),
                "invalid fp8 TMA forward traits: see fp8_tma_space::config_valid");
  static_assert(tma_forward_schedule_valid(BlockM, fp8_tma_space::kStages,
                                           fp8_tma_space::overlaps(HeadDim), Pingpong),
                "pingpong takes turns between two consumer warpgroups (Br 128) with the "
                "overlapped loop (padded head dims of 128)");
  using Element = e4m3x2_t;  // Q, K and Vᵀ in shared memory, two codes an element
  using Output = bfloat16_t;
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = fp8_tma_space::padded_head_dim(HeadDim);  // in codes
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = fp8_tma_space::kBlockN;
  static constexpr int kStages = fp8_tma_space::kStages;
  static constexpr int kConsumerThreads = BlockM / 64 * 128;
  static constexpr int kThreads = tma_forward_threads(BlockM);
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  static constexpr bool kScaled = Softcap;
  // The 16-bit TMA forward's consumer loops (tma_forward_consumer.cuh), P in registers (rounded
  // to e4m3 there): overlapped (the softmax of a block under the previous block's P V) up to a
  // padded head dim of 128, pingpong as the config says; above, each product waited for: with
  // O's 128 registers beside S's 64 and P's 16 the overlapped loop spilled 144 bytes and
  // serialized its wgmmas (ptxas C7512, CUDA 13).
  static constexpr bool kOverlap = fp8_tma_space::overlaps(HeadDim);
  static constexpr bool kPingpong = Pingpong;
  static constexpr bool kPShared = false;
  // What the sm_90a forward's shared parts (TileSchedule, ConsumerRows) ask of a traits: one
  // CTA a dense tile, no modifier, Q, K and V all e4m3.
  static constexpr bool kPersistent = false;
  static constexpr bool kVarlen = false;
  static constexpr int kClusterBlocks = 1;
  static constexpr bool kKvE4m3 = false;
  static constexpr bool kQkE4m3 = true;
  using Modifiers = NoModifiers;
  // setmaxnreg's counts with two consumer warpgroups: the producer warpgroup transposes V
  // (sixteen words of Vᵀ in flight a thread: 47 registers, ptxas), so it keeps 56.
  static constexpr TmaForwardRegisters kRegisters =
      BlockM == 128 ? TmaForwardRegisters{224, 56} : TmaForwardRegisters{0, 0};

  using QTile = swizzled_tile<Element, BlockM, kHeadDimPadded / 2>;
  using KTile = swizzled_tile<Element, kBlockN, kHeadDimPadded / 2>;
  using ValuesT = swizzled_tile<Element, kHeadDimPadded, kBlockN / 2>;  // Vᵀ: head dim by keys
  using StagingTile = e4m3_tile<kBlockN, kHeadDimPadded>;  // V as TMA wrote it, row-major bytes
  using OutputTile = swizzled_tile<Output, 64, kHeadDimPadded>;  // a warpgroup's O
  static_assert(OutputTile::kBytes == StagingTile::kBytes && BlockM / 64 <= kStages,
                "each consumer warpgroup's O over a staging slot of its own");
  using Ring = PipelineRing<kStages>;
  using StagingRing = PipelineRing<kStages>;
  static constexpr int kSharedBytes = fp8_tma_space::shared_bytes(HeadDim, BlockM);
};

/// The kernel's shared memory, carved from the dynamic buffer; ring slots are computed from
/// slot 0 (an array indexed by the run-time stage would go to the stack).
template <class Traits>
struct Fp8TmaShared {
  typename Traits::QTile q;
  typename Traits::KTile k0;                  // slot 0 of the K ring
  typename Traits::ValuesT v0;                // slot 0 of the Vᵀ ring
  typename Traits::StagingTile staging0;      // staging slot 0
  mbarrier_t* q_full;                         // Q has landed (or the tile has no key)
  typename Traits::Ring k_ring;               // K slots: TMA fills them
  typename Traits::Ring v_ring;               // Vᵀ slots: the producer warpgroup fills them
  typename Traits::StagingRing staging_ring;  // TMA fills a staging slot, the producers free it

  FJ_DEVICE typename Traits::KTile k(int stage) const {
    return {k0.data + stage * Traits::KTile::kBytes / 2};
  }
  /// Vᵀ's slot `stage` (named as the 16-bit forward's V slots: its consumer loop reads them).
  FJ_DEVICE typename Traits::ValuesT v(int stage) const {
    return {v0.data + stage * Traits::ValuesT::kBytes / 2};
  }
  FJ_DEVICE typename Traits::StagingTile staging(int slot) const {
    return {staging0.data + slot * Traits::StagingTile::kBytes};
  }
  /// Warpgroup `group`'s O on its way out, over staging slot `group`: free once the warpgroup
  /// has waited for the tile's last Vᵀ, which the producers wrote after reading every staged V.
  FJ_DEVICE typename Traits::OutputTile output(int group) const {
    return {reinterpret_cast<typename Traits::Output*>(staging(group).data)};
  }
};

template <class Traits>
FJ_DEVICE Fp8TmaShared<Traits> carve_fp8_tma_shared(unsigned char* base) {
  base = align_swizzle_atom(base);  // every tile is whole 1024-byte atoms
  Fp8TmaShared<Traits> smem;
  smem.q = carve_tile<typename Traits::QTile>(base);
  smem.k0 = {reinterpret_cast<e4m3x2_t*>(base)};
  base += Traits::kStages * Traits::KTile::kBytes;
  smem.v0 = {reinterpret_cast<e4m3x2_t*>(base)};
  base += Traits::kStages * Traits::ValuesT::kBytes;
  smem.staging0 = {base};
  base += Traits::kStages * Traits::StagingTile::kBytes;
  smem.q_full = reinterpret_cast<mbarrier_t*>(base);
  smem.k_ring = typename Traits::Ring{smem.q_full + 1};
  smem.v_ring = typename Traits::Ring{smem.q_full + 1 + 2 * Traits::kStages};
  smem.staging_ring = typename Traits::StagingRing{smem.q_full + 1 + 4 * Traits::kStages};
  return smem;
}

}  // namespace flashjit
