#pragma once
// One specialization of the fp8 forward (fp8_forward_kernel.cuh) and its space. The host
// includes this file to enumerate, check and size configs (fp8_forward.cpp); the traits
// static_assert the same predicate.
#include "attention/parts/mask_kind.cuh"
#include "attention/parts/sequence_layout.cuh"
#include "tile/numeric.cuh"
#include "tile/shared_layout.cuh"

namespace flashjit {
namespace fp8_forward_space {

/// Bytes of k in one m16n8k32 step: the head dim is padded to it (zeros).
constexpr int kMmaK = 32;

/// Head dims in 16-byte rows of fp8 (cp.async chunks), as the 16-bit kernels take 8 to 256.
constexpr bool head_dim_supported(int head_dim) {
  return head_dim >= 16 && head_dim <= 256 && head_dim % 16 == 0;
}
constexpr int padded_head_dim(int head_dim) { return (head_dim + kMmaK - 1) / kMmaK * kMmaK; }

/// Bytes of a shared row of `cols` fp8 codes held as e4m3x2_t (padded as the 16-bit tiles are,
/// so ldmatrix's eight rows fall on distinct banks).
constexpr int tile_row_bytes(int cols) { return shared_row_stride(cols / 2) * 2; }

/// Bytes of dynamic shared memory: Q, and two slots each of K, of V as it lands (unpadded
/// 16-byte chunks) and of Vᵀ (the head dim by Bc), which the products read.
constexpr int shared_bytes(int head_dim, int block_m, int block_n) {
  const int d = padded_head_dim(head_dim);
  return block_m * tile_row_bytes(d) + 2 * block_n * tile_row_bytes(d) + 2 * block_n * d +
         2 * d * tile_row_bytes(block_n);
}

/// Bytes of the bf16 tile O is staged in at the end, over the others (free by then).
constexpr int output_bytes(int head_dim, int block_m) {
  return block_m * shared_row_stride(padded_head_dim(head_dim)) * 2;
}

constexpr int rows_per_warp(int block_m, int warps) { return block_m / warps; }

/// Br 64 or 128 in 16-row slabs per warp, Bc 32, 64 or 128 (whole 32-key steps of P V), 4 or 8
/// warps, S's and O's fp32 accumulators at most 192 a thread (as the 16-bit forward), the
/// whole within 227 KB.
constexpr bool config_valid(int head_dim, int block_m, int block_n, int warps) {
  const int d = padded_head_dim(head_dim);
  return head_dim_supported(head_dim) && (warps == 4 || warps == 8) &&
         (block_m == 64 || block_m == 128) && block_m % (warps * 16) == 0 &&
         (block_n == 32 || block_n == 64 || block_n == 128) &&
         rows_per_warp(block_m, warps) * (block_n + d) / 32 <= 192 &&
         output_bytes(head_dim, block_m) <= shared_bytes(head_dim, block_m, block_n) &&
         shared_bytes(head_dim, block_m, block_n) <= 227 * 1024;
}

}  // namespace fp8_forward_space

template <int HeadDim, int BlockM, int BlockN, int Warps, MaskKind Mask, bool Softcap,
          class Layout_ = DenseLayout>
struct Fp8ForwardTraits {
  static_assert(fp8_forward_space::config_valid(HeadDim, BlockM, BlockN, Warps),
                "invalid fp8 forward traits: see fp8_forward_space::config_valid");
  using Element = e4m3x2_t;   // Q, K and Vᵀ in shared memory, two codes an element
  using Output = bfloat16_t;  // O, as FlashAttention-3's fp8 forward writes it
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimPadded = fp8_forward_space::padded_head_dim(HeadDim);
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = Warps * 32;
  static constexpr MaskKind kMask = Mask;
  static constexpr bool kSoftcap = Softcap;
  using Layout = Layout_;
  static constexpr int kRowsPerWarp = fp8_forward_space::rows_per_warp(BlockM, Warps);
  static constexpr int kSharedBytes = fp8_forward_space::shared_bytes(HeadDim, BlockM, BlockN);
};

}  // namespace flashjit
