#pragma once
// One specialization of each backward kernel: everything it needs as a compile-time constant.
// The host names them in the kernels' name expressions (attention/attention_backward.cpp), e.g.
//   flashjit::attention_backward_dkdv_kernel<flashjit::BackwardKeyTraits<flashjit::bfloat16_t,
//       128, 64, 128, 8, 2, flashjit::MaskKind::window, false, true>>
//   flashjit::attention_backward_dq_kernel<flashjit::BackwardQueryTraits<flashjit::bfloat16_t,
//       128, 64, 64, 4, flashjit::MaskKind::window, false>>
// with a last `true` for a variable-length batch (attention/parts/backward_sequence.cuh), and with
// score or mask modifiers a last one naming their struct (attention/parts/modifiers.cuh).
#include "attention/fa2/backward_space.cuh"
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/modifiers.cuh"
#include "tile/numeric.cuh"

namespace flashjit {

/// The dK/dV kernel's: Br query rows streamed per step past Bc keys, `Stages` Q/dO buffers;
/// AtomicDq: also add dQ = dS K to the fp32 workspace (the default, non-deterministic mode).
template <typename Element_, int HeadDim, int BlockM, int BlockN, int Warps, int Stages,
          MaskKind Mask, bool Softcap, bool AtomicDq, bool Varlen = false,
          class Modifiers_ = NoModifiers>
struct BackwardKeyTraits {
  static_assert(attention_backward_space::key_kernel_valid(HeadDim, BlockM, BlockN, Warps, Stages,
                                                           Softcap, AtomicDq),
                "invalid dK/dV traits: see attention_backward_space::key_kernel_valid (head dim "
                "a multiple of 8 in [8, 256], warp grids of whole 16 x 16 blocks, accumulators "
                "and shared memory within budget)");
  using Element = Element_;  // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = attention_backward_space::key_kernel_head_dim(HeadDim);
  static constexpr int kBlockM = BlockM;  // query rows per streamed block
  static constexpr int kBlockN = BlockN;  // keys per CTA
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kStages = Stages;
  // __launch_bounds__'s blocks per SM: asking for one lets ptxas use all 255 registers (aiming
  // for more, it spilled at some configs of the earlier kernels to get there).
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  static constexpr bool kAtomicDq = AtomicDq;
  static constexpr bool kVarlen = Varlen;  // per-sequence lengths and offsets (cu_seqlens)
  // the caller's score and mask modifiers (attention/parts/modifiers.cuh)
  using Modifiers = Modifiers_;
  static constexpr int kSharedBytes =
      attention_backward_space::key_kernel_shared_bytes(HeadDim, BlockM, BlockN, Stages);
};

/// The dQ kernel's (deterministic mode): Br query rows per CTA, Bc keys per streamed block.
template <typename Element_, int HeadDim, int BlockM, int BlockN, int Warps, MaskKind Mask,
          bool Softcap, bool Varlen = false, class Modifiers_ = NoModifiers>
struct BackwardQueryTraits {
  static_assert(attention_backward_space::query_kernel_valid(HeadDim, BlockM, BlockN, Warps,
                                                             Softcap),
                "invalid dQ traits: see attention_backward_space::query_kernel_valid (head dim "
                "a multiple of 8 in [8, 256], Br a multiple of 16 x warps, Bc of 16, "
                "accumulators and shared memory within budget)");
  using Element = Element_;  // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = attention_forward_space::padded_head_dim(HeadDim);
  static constexpr int kBlockM = BlockM;  // query rows per CTA
  static constexpr int kBlockN = BlockN;  // keys per streamed block
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kMinBlocksPerSm = 1;  // as BackwardKeyTraits
  static constexpr int kStages = attention_backward_space::kQueryStages;
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  static constexpr bool kVarlen = Varlen;  // per-sequence lengths and offsets (cu_seqlens)
  using Modifiers = Modifiers_;            // as BackwardKeyTraits
  static constexpr int kQueryRowsPerWarp = BlockM / Warps;
  static constexpr int kSharedBytes =
      attention_backward_space::query_kernel_shared_bytes(HeadDim, BlockM, BlockN);
};

}  // namespace flashjit
