#pragma once
// One specialization of the Hopper forward kernel (wgmma_forward_kernel.cuh): everything it
// needs as a compile-time constant, and the shared memory it carves.
#include "attention/forward_space.cuh"
#include "attention/mask_kind.cuh"
#include "tile/shared_tile.cuh"
#include "tile/warpgroup_tile.cuh"

namespace flashjit {

/// Whether the Hopper forward takes (head_dim, Br, Bc): Br a whole number (1 to 3) of 64-row
/// warpgroups, Bc a multiple of 16 up to wgmma's N of 256, and a head dim whose padded width
/// is also a wgmma N (the N of O += P V).
constexpr bool wgmma_forward_valid(int head_dim, int block_m, int block_n) {
  const int padded = attention_forward_space::padded_head_dim(head_dim);
  return attention_forward_space::head_dim_supported(head_dim) && padded <= 256 &&
         block_m % 64 == 0 && block_m >= 64 && block_m <= 192 && block_n % 16 == 0 &&
         block_n >= 16 && block_n <= 256;
}

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
};

}  // namespace flashjit
