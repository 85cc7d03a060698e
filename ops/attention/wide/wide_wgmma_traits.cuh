#pragma once
// One specialization of the wide forward on wgmma (attention/wide/wide_wgmma_kernel.cuh), named
// by the host (attention/wide/wide_forward.cpp), e.g. MLA's absorbed decoding on a paged cache
// with split-KV:
//   flashjit::attention_forward_wide_wgmma_kernel<flashjit::WideWgmmaTraits<
//       flashjit::bfloat16_t, 576, 512, flashjit::MaskKind::none, false,
//       flashjit::SequenceLayout<true, true, true, true>>>
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/sequence_layout.cuh"
#include "attention/wide/wide_forward_space.cuh"
#include "tile/numeric.cuh"

namespace flashjit {

template <typename Element_, int HeadDim, int HeadDimV, MaskKind Mask, bool Softcap,
          class Layout_ = DenseLayout>
struct WideWgmmaTraits {
  static_assert(wide_forward_space::wgmma_head_dims_supported(HeadDim, HeadDimV),
                "invalid wide wgmma traits: see wide_forward_space::wgmma_config_valid");
  static_assert(!Layout_::kKvE4m3, "the wide forward reads 16-bit caches");
  using Element = Element_;                   // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;    // Q's and K's columns (whole 64-column panels)
  static constexpr int kHeadDimV = HeadDimV;  // V's and O's: K's first HeadDimV columns
  static constexpr int kHalfV = HeadDimV / wide_forward_space::kWgmmaGroups;  // a warpgroup's
  static constexpr int kBlockM = wide_forward_space::kWgmmaBlockM;            // Br
  static constexpr int kBlockN = wide_forward_space::kWgmmaBlockN;            // Bc
  static constexpr int kThreads = wide_forward_space::kWgmmaWarps * 32;
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  using Layout = Layout_;
  static constexpr int kSharedBytes = wide_forward_space::wgmma_shared_bytes(HeadDim);
};

}  // namespace flashjit
