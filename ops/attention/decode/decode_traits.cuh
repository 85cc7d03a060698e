#pragma once
// One specialization of the decode kernel (attention/decode/decode_kernel.cuh): everything it
// needs as a compile-time constant. The host names it in the kernel's name expression
// (attention/decode/decode_forward.cpp), e.g.
//   flashjit::attention_decode_kernel<flashjit::DecodeTraits<flashjit::bfloat16_t, 128, 16,
//       16, 4, 4, flashjit::MaskKind::none, false, flashjit::SequenceLayout<...>>>
// and with score or mask modifiers a last argument naming their struct (parts/modifiers.cuh).
#include "attention/decode/decode_space.cuh"
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/modifiers.cuh"
#include "attention/parts/sequence_layout.cuh"
#include "tile/numeric.cuh"

namespace flashjit {

template <typename Element_, int HeadDim, int Rows, int Keys, int Warps, int Stages, MaskKind Mask,
          bool Softcap, class Layout_, class Modifiers_ = NoModifiers>
struct DecodeTraits {
  static_assert(attention_decode_space::config_valid(HeadDim, Rows, Keys, Warps, Stages,
                                                     Layout_::kKvE4m3),
                "invalid decode traits: see attention_decode_space::config_valid");
  using Element = Element_;  // half_t or bfloat16_t
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = attention_decode_space::padded_head_dim(HeadDim);
  static constexpr int kRows = Rows;  // packed (query, head) rows, every warp's
  static constexpr int kKeys = Keys;  // keys per warp chunk
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kStages = Stages;  // chunks in each warp's ring
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  using Layout = Layout_;
  using Modifiers = Modifiers_;  // the caller's score and mask modifiers
  static_assert(!Modifiers::kDropout, "dropout runs on the mma.sync kernels (attention/fa2/)");
  // What ForwardBlock reads: the CTA's rows, and the unit its key ranges count in (a chunk).
  static constexpr int kBlockM = Rows;
  static constexpr int kBlockN = Keys;
  static constexpr bool kQInRegisters = attention_decode_space::q_in_registers(HeadDim, Rows, Keys);
  static constexpr int kSharedBytes =
      attention_decode_space::shared_bytes(HeadDim, Rows, Keys, Warps, Stages, Layout_::kKvE4m3);
};

}  // namespace flashjit
