#pragma once
// The space of the fp8 forward on sm_90a's TMA and wgmma (fp8_tma_kernel.cuh): its tile, its
// shared memory and its validity. The host includes this file to enumerate, check and size
// configs (fp8_forward.cpp); the traits (fp8_tma_traits.cuh) static_assert the same predicate.
#include "attention/hopper/tma_forward_space.cuh"

namespace flashjit {
namespace fp8_tma_space {

/// Keys a block: one 128-byte swizzle line of Vᵀ (wgmma's k is bytes here).
constexpr int kBlockN = 128;
/// Slots of the K and the Vᵀ ring.
constexpr int kStages = 2;

/// The head dim in whole 128-code lines (TMA's zeros past it add nothing to S; O's columns past
/// it are never stored).
constexpr int padded_head_dim(int head_dim) { return (head_dim + 127) / 128 * 128; }

/// Whether the consumers run the overlapped loop (Fp8TmaTraits::kOverlap): up to a padded head
/// dim of 128.
constexpr bool overlaps(int head_dim) { return padded_head_dim(head_dim) <= 128; }

/// Bytes of dynamic shared memory: Q, and kStages slots each of K, of Vᵀ and of the staging
/// ring V lands in (each consumer warpgroup's O, 64 rows of bf16, is staged over one of those
/// at the end), the barriers (Q's, a full and an empty one a slot) and 1024 bytes to align the
/// swizzled tiles.
constexpr int shared_bytes(int head_dim, int block_m) {
  const int d = padded_head_dim(head_dim);
  constexpr int kRings = 3;  // K, Vᵀ, staging
  return 1024 + block_m * d + kRings * kStages * kBlockN * d + (1 + kRings * 2 * kStages) * 8;
}

/// Head dims of whole 16-code rows from 64 to 256 (TMA's strides; below 64 the mma.sync form
/// wastes less), Br one or two consumer warpgroups (O's staging slots), `warps` counting the
/// producer warpgroup's 4, pingpong with two consumer warpgroups in the overlapped loop, the
/// whole within 227 KB.
constexpr bool config_valid(int head_dim, int block_m, int block_n, int warps,
                            bool pingpong = false) {
  return (!pingpong || (overlaps(head_dim) && block_m == 128)) && head_dim % 16 == 0 &&
         head_dim >= 64 && head_dim <= 256 && (block_m == 64 || block_m == 128) &&
         block_n == kBlockN && warps * 32 == tma_forward_threads(block_m) &&
         shared_bytes(head_dim, block_m) <= kTmaForwardSharedLimit;
}

}  // namespace fp8_tma_space

}  // namespace flashjit
