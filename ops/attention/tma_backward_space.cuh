#pragma once
// The warp-specialized Hopper backward's sizes and validity predicates
// (tma_backward_kernel.cuh). The host includes this file to enumerate, check and size configs;
// the kernel's traits static_assert the same predicates.
#include "attention/tma_forward_space.cuh"

namespace flashjit {

/// Query rows per streamed block: one wgmma M of dQ = dS K, and the N of Sᵀ = K Qᵀ.
inline constexpr int kTmaBackwardBlockM = 64;

/// Threads of a block with Bc = block_n keys: one consumer warpgroup per 64 keys, then the
/// producer warpgroup (one of its threads issues the loads, its second warp writes dQ).
constexpr int tma_backward_threads(int block_n) { return block_n / 64 * 128 + 128; }

/// Bytes of shared memory for (head_dim, Bc, stages): K and V (loaded once), `stages` slots of
/// Q and dO, dSᵀ (Bc × Br, the A of dQ = dS K), one fp32 staging block of dQ (Br × head_dim)
/// per consumer warpgroup (the source of its bulk reduction), the barriers (K and V's, a full
/// and an empty one per slot), and 1024 bytes to align the swizzled tiles.
constexpr int tma_backward_shared_bytes(int head_dim, int block_n, int stages) {
  const int tile = 2 * tma_forward_padded_head_dim(head_dim);  // bytes per row of a 16-bit tile
  const int consumers = block_n / 64;
  return 1024 + 2 * block_n * tile + 2 * stages * kTmaBackwardBlockM * tile +
         block_n * kTmaBackwardBlockM * 2 + consumers * kTmaBackwardBlockM * head_dim * 4 +
         (1 + 2 * stages) * 8;
}

/// Whether the warp-specialized backward takes (head_dim, Bc, stages): head dims 64 to 256 in
/// multiples of 8 (TMA's 16-byte rows), Bc one or two 64-key consumer warpgroups, one or two
/// stages, the whole in shared memory.
constexpr bool tma_backward_valid(int head_dim, int block_n, int stages) {
  return head_dim % 8 == 0 && head_dim >= 64 && head_dim <= 256 &&
         (block_n == 64 || block_n == 128) && (stages == 1 || stages == 2) &&
         tma_backward_shared_bytes(head_dim, block_n, stages) <= kTmaForwardSharedLimit;
}

}  // namespace flashjit
