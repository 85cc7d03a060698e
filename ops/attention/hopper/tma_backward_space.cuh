#pragma once
// The warp-specialized Hopper backward's sizes and validity predicates
// (tma_backward_kernel.cuh). The host includes this file to enumerate, check and size configs;
// the kernel's traits static_assert the same predicates.
#include "attention/hopper/tma_forward_space.cuh"

namespace flashjit {

/// Query rows per streamed block (Br), the default: one wgmma M of dQ = dS K, and the N of
/// Sᵀ = K Qᵀ. A padded head dim of 64 also takes 128 (tma_backward_valid).
inline constexpr int kTmaBackwardBlockM = 64;

/// Consumer warpgroups of a block with Bc = block_n keys: one per 64 keys, each its own; or,
/// with `shared_keys` (Bc 64 only), two on the same 64 keys, which split the block's work
/// (FlashAttention-3's split at head dims above 128): each computes the scores of half the
/// query rows, and one accumulates dV while the other accumulates dK, so that a thread holds
/// one head-dim-wide gradient instead of two.
constexpr int tma_backward_consumer_groups(int block_n, bool shared_keys) {
  return shared_keys ? 2 : block_n / 64;
}

/// Threads of a block: the consumer warpgroups, then the producer warpgroup (one of its threads
/// issues the loads, its second warp writes dQ).
constexpr int tma_backward_threads(int block_n, bool shared_keys = false) {
  return tma_backward_consumer_groups(block_n, shared_keys) * 128 + 128;
}

/// Whether the consumers add dQ's partial sums into the workspace straight from their registers
/// (8-byte vector reductions) rather than through an fp32 staging block and the writer warp's
/// bulk reduction: with shared keys and two stages above a padded head dim of 192, where two
/// Q/dO slots and a staging block do not both fit in shared memory. The atomic mode only: the
/// deterministic one orders the writer's sums.
constexpr bool tma_backward_dq_from_registers(int head_dim, int block_n, int stages,
                                              bool shared_keys) {
  return shared_keys && block_n == 64 && stages == 2 && tma_forward_padded_head_dim(head_dim) > 192;
}

/// fp32 staging blocks of dQ (Br × head_dim), the source of a bulk reduction and where dK and dV
/// are staged on their way out: one per consumer warpgroup, one with shared keys (whose two
/// warpgroups hand over one block of dQ and stage one of dK and dV each); none where dQ goes
/// from registers (dK and dV are staged in the Q slots then).
constexpr int tma_backward_staging_blocks(int head_dim, int block_n, int stages, bool shared_keys) {
  if (tma_backward_dq_from_registers(head_dim, block_n, stages, shared_keys)) return 0;
  return shared_keys ? 1 : block_n / 64;
}

/// Bytes of shared memory for (head_dim, Bc, stages, shared keys, Br): K and V (loaded once),
/// `stages` slots of Q and dO, dSᵀ (Bc × Br, the A of dQ = dS K) and with shared keys Pᵀ too
/// (the A of dV += Pᵀ dO, which one warpgroup computes from both warpgroups' halves), the fp32
/// staging blocks (tma_backward_staging_blocks, Br rows each), each slot's row statistics (its
/// Br rows' LSEs and Ds: attention/parts/row_stats.cuh), the barriers (K and V's, a full and
/// an empty one per slot), and 1024 bytes to align the swizzled tiles.
constexpr int tma_backward_shared_bytes(int head_dim, int block_n, int stages,
                                        bool shared_keys = false,
                                        int block_m = kTmaBackwardBlockM) {
  const int tile = 2 * tma_forward_padded_head_dim(head_dim);  // bytes per row of a 16-bit tile
  const int score_tiles = shared_keys ? 2 : 1;
  return 1024 + 2 * block_n * tile + 2 * stages * block_m * tile +
         score_tiles * block_n * block_m * 2 +
         tma_backward_staging_blocks(head_dim, block_n, stages, shared_keys) * block_m * head_dim *
             4 +
         stages * block_m * 2 * 4 + (1 + 2 * stages) * 8;
}

/// Whether Br = `block_m` goes with the rest: 64 always; 128 (FlashAttention-3's 128 × 128 at
/// head dim 64, half the steps for the same keys) with keys of each warpgroup's own at a padded
/// head dim of 64, where a thread's Sᵀ and dPᵀ of 128 queries (64 registers each) fit beside
/// dK and dV (32 each); its dQ is two wgmmas of 64 rows.
constexpr bool tma_backward_block_m_valid(int head_dim, int block_m, bool shared_keys) {
  return block_m == kTmaBackwardBlockM ||
         (block_m == 128 && !shared_keys && tma_forward_padded_head_dim(head_dim) == 64);
}

/// Whether the warp-specialized backward takes (head_dim, Bc, stages, shared keys, the
/// deterministic mode, Br): head dims 64 to 256 in multiples of 8 (TMA's 16-byte rows); Bc one or
/// two 64-key consumer warpgroups, or two sharing 64 keys from a padded head dim of 128 (below
/// it they would not both have dQ columns); above 128 only the shared keys (a warpgroup with its
/// own keys would hold dK and dV of 64 × 192 or more: 192 or more registers a thread, which
/// spill); one or two stages; Br as tma_backward_block_m_valid says; the whole in shared
/// memory; dQ from registers in the atomic mode only.
constexpr bool tma_backward_valid(int head_dim, int block_n, int stages, bool shared_keys = false,
                                  bool deterministic = false, int block_m = kTmaBackwardBlockM) {
  const int padded = tma_forward_padded_head_dim(head_dim);
  return head_dim % 8 == 0 && head_dim >= 64 && head_dim <= 256 &&
         tma_backward_block_m_valid(head_dim, block_m, shared_keys) &&
         !(deterministic &&
           tma_backward_dq_from_registers(head_dim, block_n, stages, shared_keys)) &&
         (shared_keys ? block_n == 64 && padded >= 128
                      : (block_n == 64 || block_n == 128) && padded <= 128) &&
         (stages == 1 || stages == 2) &&
         tma_backward_shared_bytes(head_dim, block_n, stages, shared_keys, block_m) <=
             kTmaForwardSharedLimit;
}

}  // namespace flashjit
