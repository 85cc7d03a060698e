#pragma once
// One specialization of the Hopper forward kernel (wgmma_forward_kernel.cuh): everything it
// needs as a compile-time constant, and the shared memory it carves.
#include "attention/hopper/wgmma_forward_space.cuh"
#include "attention/parts/mask_kind.cuh"
#include "tile/shared_tile.cuh"
#include "tile/warpgroup_tile.cuh"

namespace flashjit {

template <typename Element_, int HeadDim, int BlockM, int BlockN, MaskKind Mask, bool Softcap>
struct WgmmaForwardTraits {
  static_assert(wgmma_forward_valid(HeadDim, BlockM, BlockN),
                "invalid Hopper forward traits: see wgmma_forward_valid (Br 64, 128 or 192, Bc a "
                "multiple of 16 up to 256, head dim a multiple of 8 up to 256)");
  using Element = Element_;  // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = attention_forward_space::padded_head_dim(HeadDim);
  static constexpr int kBlockM = BlockM;  // Br: 64 query rows per warpgroup
  static constexpr int kBlockN = BlockN;  // Bc
  static constexpr int kWarpgroups = BlockM / 64;
  static constexpr int kThreads = kWarpgroups * 128;
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;

  using QTile = core_matrix_tile<Element, BlockM, kHeadDimPadded>;   // wgmma's layout
  using KVTile = core_matrix_tile<Element, BlockN, kHeadDimPadded>;  // K and V alike
  using OTile = smem_tile<Element, BlockM, kHeadDimPadded>;          // O on its way out
  static constexpr int kSharedBytes = QTile::kBytes + 2 * KVTile::kBytes + OTile::kBytes;
  static_assert(kSharedBytes == wgmma_forward_shared_bytes(HeadDim, BlockM, BlockN),
                "the host's wgmma_forward_shared_bytes() must be what the kernel carves");
};

}  // namespace flashjit
