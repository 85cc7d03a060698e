#pragma once
// One specialization of the backward kernels: everything they need as a compile-time constant.
// The host names it in the kernels' name expressions (kernels/attention_backward.cpp), e.g.
//   flashjit::attention_backward_dq_kernel<flashjit::BackwardTraits<flashjit::bfloat16_t, 128,
//       64, 64, 4, flashjit::MaskKind::window, false,
//       flashjit::attention_backward_space::KeyGradients::both>>
#include "attention/backward_space.cuh"
#include "attention/mask_kind.cuh"
#include "tile/numeric.cuh"

namespace flashjit {

template <typename Element_, int HeadDim, int BlockM, int BlockN, int Warps, MaskKind Mask,
          bool Softcap, attention_backward_space::KeyGradients Gradients>
struct BackwardTraits {
  static_assert(attention_backward_space::config_valid(HeadDim, BlockM, BlockN, Warps),
                "invalid backward traits: see attention_backward_space::config_valid (head dim "
                "a multiple of 8 in [8, 256], Br and Bc multiples of 16 x warps, accumulators "
                "and shared memory within budget)");
  using Element = Element_;  // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = attention_forward_space::padded_head_dim(HeadDim);
  static constexpr int kBlockM = BlockM;  // query rows per block
  static constexpr int kBlockN = BlockN;  // key rows per block
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  // __launch_bounds__'s blocks per SM: asking for one lets ptxas use all 255 registers. Without
  // it, ptxas aimed for more blocks at some configs and spilled to get there (on sm_80: dK with
  // softcap at head dim 176, 168 registers and 16 bytes spilled, now 191 and none; dQ at head
  // dim 16 with the window mask, 80 registers and 4 bytes, now 127 and none).
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr int kStages = 2;  // the dQ kernel double-buffers K and V (K is read twice)
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  static constexpr attention_backward_space::KeyGradients kGradients = Gradients;
  static constexpr bool kWantDk = Gradients != attention_backward_space::KeyGradients::dv;
  static constexpr bool kWantDv = Gradients != attention_backward_space::KeyGradients::dk;
  static constexpr int kQueryRowsPerWarp = BlockM / Warps;  // dQ kernel
  static constexpr int kKeyRowsPerWarp = BlockN / Warps;    // dK/dV kernel
  static constexpr int kSharedBytes =
      attention_backward_space::shared_bytes(HeadDim, BlockM, BlockN);
};

}  // namespace flashjit
