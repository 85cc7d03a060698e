#pragma once
// One specialization of the wide forward kernel (attention/wide/wide_forward_kernel.cuh), named by
// the host (attention/attention_forward.cpp), e.g. MLA's absorbed decoding on a paged cache:
//   flashjit::attention_forward_wide_kernel<flashjit::WideForwardTraits<flashjit::bfloat16_t,
//       576, 512, 64, 32, 2, 2, flashjit::MaskKind::none, false, true,
//       flashjit::SequenceLayout<true, true, true, false>>>
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/sequence_layout.cuh"
#include "attention/wide/wide_forward_space.cuh"
#include "tile/numeric.cuh"

namespace flashjit {

template <typename Element_, int HeadDim, int HeadDimV, int BlockM, int BlockN, int Groups,
          int Stages, MaskKind Mask, bool Softcap, bool ValuesInKeys, class Layout_ = DenseLayout>
struct WideForwardTraits {
  static_assert(wide_forward_space::config_valid(HeadDim, HeadDimV, BlockM, BlockN, Groups, Stages,
                                                 ValuesInKeys),
                "invalid wide forward traits: see wide_forward_space::config_valid");
  static_assert(!Layout_::kKvE4m3, "the wide forward reads 16-bit caches");
  using Element = Element_;  // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimV = HeadDimV;
  static constexpr int kColumnGroups = Groups;
  // Q's and K's columns, and the key tile's, which serves V too (V's columns past head_dim_v
  // load as zeros, or hold K's when V is in the keys: no stored O column reads them).
  static constexpr int kHeadDimPadded = wide_forward_space::padded_head_dim(HeadDim, Groups);
  static constexpr int kHeadDimVPadded = wide_forward_space::padded_head_dim(HeadDimV, Groups);
  static constexpr int kBlockM = BlockM;  // Br
  static constexpr int kBlockN = BlockN;  // Bc
  static constexpr int kWarps = wide_forward_space::warps(BlockM, Groups);
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kStages = Stages;
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  /// V is K's first head_dim_v columns in the same memory (MLA's latent cache): K's blocks are
  /// loaded once and serve both products (attention/fa2/key_value_pipeline.cuh).
  static constexpr bool kValuesInKeys = ValuesInKeys;
  using Layout = Layout_;
  static constexpr int kSharedBytes =
      wide_forward_space::shared_bytes(HeadDim, BlockM, BlockN, Groups, Stages, ValuesInKeys);
};

}  // namespace flashjit
