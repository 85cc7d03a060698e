#pragma once
// One specialization of the forward kernel: everything it needs as a compile-time constant.
// The host names it in the kernel's name expression (attention/attention_forward.cpp), e.g.
//   flashjit::attention_forward_kernel<flashjit::ForwardTraits<flashjit::bfloat16_t, 128, 128,
//       64, 4, 2, flashjit::MaskKind::window, false, false>>
// and with an inference layout (varlen, paged, GQA packing, split-KV) an argument such as
// flashjit::SequenceLayout<true, true, true, true>, and with score or mask modifiers a last one
// naming their struct (attention/parts/modifiers.cuh).
#include "attention/fa2/forward_space.cuh"
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/modifiers.cuh"
#include "attention/parts/sequence_layout.cuh"
#include "tile/numeric.cuh"

namespace flashjit {

template <typename Element_, int HeadDim, int BlockM, int BlockN, int Warps, int Stages,
          MaskKind Mask, bool Softcap, bool QInRegisters, class Layout_ = DenseLayout,
          class Modifiers_ = NoModifiers>
struct ForwardTraits {
  static_assert(attention_forward_space::config_valid(HeadDim, BlockM, BlockN, Warps, Stages,
                                                      QInRegisters),
                "invalid forward traits: see attention_forward_space::config_valid (head dim a "
                "multiple of 8 in [8, 256], Br a multiple of 16 x warps, Bc a multiple of 16, "
                "registers and shared memory within budget)");
  using Element = Element_;  // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = attention_forward_space::padded_head_dim(HeadDim);
  static constexpr int kBlockM = BlockM;  // Br
  static constexpr int kBlockN = BlockN;  // Bc
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kStages = Stages;
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  static constexpr bool kQInRegisters = QInRegisters;
  // how the batch's sequences are found (attention/parts/sequence_layout.cuh)
  using Layout = Layout_;
  // the caller's score and mask modifiers (attention/parts/modifiers.cuh)
  using Modifiers = Modifiers_;
  static constexpr int kRowsPerWarp = attention_forward_space::rows_per_warp(BlockM, Warps);
  static constexpr int kSharedBytes =
      attention_forward_space::shared_bytes(HeadDim, BlockM, BlockN, Stages);
};

}  // namespace flashjit
