#pragma once
// The forward kernel's configuration space and validity predicate. The host includes this file
// to enumerate, check and name configs; the kernel static_asserts the same predicate, so an
// illegal config is dropped before any compile.
#include "tile/shared_layout.cuh"

namespace flashjit::attention_forward_space {

/// Query rows per CTA (Br), key rows per iteration (Bc), warps per CTA, K/V pipeline stages,
/// and whether each warp keeps its Q rows in registers (read from shared memory once) instead
/// of reading them from shared memory for every key block.
constexpr int kBlockM[] = {64, 128};
constexpr int kBlockN[] = {32, 64, 128};
constexpr int kWarps[] = {4, 8};
constexpr int kStages[] = {1, 2};
constexpr bool kQInRegisters[] = {false, true};

constexpr int kMinHeadDim = 8;
constexpr int kMaxHeadDim = 256;
constexpr int kMmaRows = 16;  // mma.sync m16n8k16: a warp owns 16-row slabs of queries
constexpr int kMmaK = 16;
/// Per-thread registers of fp32 accumulators (S and O) and of Q when it is kept in registers,
/// above which the kernel spills.
constexpr int kMaxAccumulatorsPerThread = 192;
/// The largest dynamic shared memory any supported GPU grants a block (sm_90: 227 KB).
constexpr int kMaxSharedBytes = 227 * 1024;

constexpr bool head_dim_supported(int head_dim) {
  return head_dim >= kMinHeadDim && head_dim <= kMaxHeadDim && head_dim % 8 == 0;
}

/// The head dim the tiles use: a multiple of the mma's k (16); the padding is zero-filled.
constexpr int padded_head_dim(int head_dim) { return (head_dim + kMmaK - 1) / kMmaK * kMmaK; }

/// Bytes of dynamic shared memory: the Q tile, then `stages` K tiles and `stages` V tiles
/// (16-bit elements). The output tile is staged in the Q tile's space at the end.
constexpr int shared_bytes(int head_dim, int block_m, int block_n, int stages) {
  const int row = shared_row_stride(padded_head_dim(head_dim)) * 2;
  return block_m * row + 2 * stages * block_n * row;
}

/// Query rows each warp owns.
constexpr int rows_per_warp(int block_m, int warps) { return block_m / warps; }

/// Per-thread fp32 accumulators: S (rows_per_warp x block_n) and O (rows_per_warp x head dim)
/// spread over a warp's 32 lanes.
constexpr int accumulators_per_thread(int head_dim, int block_m, int block_n, int warps) {
  return rows_per_warp(block_m, warps) * (block_n + padded_head_dim(head_dim)) / 32;
}

/// Per-thread registers of a warp's Q rows kept in registers: rows_per_warp x head dim 16-bit
/// elements, two per register, over 32 lanes.
constexpr int q_registers_per_thread(int head_dim, int block_m, int warps) {
  return rows_per_warp(block_m, warps) * padded_head_dim(head_dim) / 64;
}

constexpr bool config_valid(int head_dim, int block_m, int block_n, int warps, int stages,
                            bool q_in_registers) {
  const int registers = accumulators_per_thread(head_dim, block_m, block_n, warps) +
                        (q_in_registers ? q_registers_per_thread(head_dim, block_m, warps) : 0);
  return head_dim_supported(head_dim) && (warps == 4 || warps == 8) &&
         block_m % (warps * kMmaRows) == 0 && block_n % kMmaK == 0 && block_n >= 16 &&
         (stages == 1 || stages == 2) && registers <= kMaxAccumulatorsPerThread &&
         shared_bytes(head_dim, block_m, block_n, stages) <= kMaxSharedBytes;
}

}  // namespace flashjit::attention_forward_space
