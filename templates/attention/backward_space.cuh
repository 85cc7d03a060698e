#pragma once
// The backward kernels' configuration space and validity predicate (host and device), beside
// the templates that static_assert it. One config drives both main kernels: the key-major
// dK/dV kernel (warps own key rows, loops over query blocks) and the query-major dQ kernel
// (warps own query rows, loops over key blocks), so Br and Bc are both whole warp slabs.
#include "attention/forward_space.cuh"

namespace flashjit::attention_backward_space {

using attention_forward_space::head_dim_supported;
using attention_forward_space::padded_head_dim;

/// Which gradients the dK/dV kernel accumulates. Large head dims split them over two launches
/// of the same kernel so each keeps one (rows, head_dim) accumulator in registers, not two.
enum class KeyGradients : int { both = 0, dk = 1, dv = 2 };

constexpr int kBlockM[] = {32, 64, 128};  // query rows per block
constexpr int kBlockN[] = {32, 64, 128};  // key rows per block
constexpr int kWarps[] = {2, 4, 8};
constexpr int kMmaRows = 16;
/// Query rows per block of the delta pre-pass (one warp each); the host sizes its grid by it.
constexpr int kDeltaRowsPerBlock = 4;
/// Per-thread fp32 accumulators above which the kernels spill.
constexpr int kMaxAccumulatorsPerThread = 176;
constexpr int kMaxSharedBytes = attention_forward_space::kMaxSharedBytes;

/// Whether the dK/dV kernel runs once (both gradients) or twice (dk, then dv) for head_dim.
constexpr bool split_key_gradients(int head_dim) { return padded_head_dim(head_dim) > 64; }

/// Per-thread fp32 accumulators of the dK/dV kernel: dK and/or dV (rows x head dim), S and dP
/// (rows x Br), per warp of Bc / warps key rows.
constexpr int key_kernel_accumulators(int head_dim, int block_m, int block_n, int warps) {
  const int rows = block_n / warps;
  const int gradients = split_key_gradients(head_dim) ? 1 : 2;
  return rows * (gradients * padded_head_dim(head_dim) + 2 * block_m) / 32;
}

/// Per-thread fp32 accumulators of the dQ kernel: dQ (rows x head dim), S and dP (rows x Bc).
constexpr int query_kernel_accumulators(int head_dim, int block_m, int block_n, int warps) {
  const int rows = block_m / warps;
  return rows * (padded_head_dim(head_dim) + 2 * block_n) / 32;
}

/// Shared memory of either kernel: two (rows, head dim) tiles of its own side (K, V or Q, dO),
/// two of the streamed side per pipeline stage (the dQ kernel double-buffers K and V), and
/// the streamed LSE and D rows (fp32) of the dK/dV kernel.
constexpr int shared_bytes(int head_dim, int block_m, int block_n) {
  const int row = shared_row_stride(padded_head_dim(head_dim)) * 2;
  const int key_kernel = 2 * block_n * row + 2 * block_m * row + 2 * block_m * 4;
  const int query_kernel = 2 * block_m * row + 2 * 2 * block_n * row;
  return key_kernel > query_kernel ? key_kernel : query_kernel;
}

constexpr bool config_valid(int head_dim, int block_m, int block_n, int warps) {
  return head_dim_supported(head_dim) && (warps == 2 || warps == 4 || warps == 8) &&
         block_m % (warps * kMmaRows) == 0 && block_n % (warps * kMmaRows) == 0 &&
         key_kernel_accumulators(head_dim, block_m, block_n, warps) <= kMaxAccumulatorsPerThread &&
         query_kernel_accumulators(head_dim, block_m, block_n, warps) <=
             kMaxAccumulatorsPerThread &&
         shared_bytes(head_dim, block_m, block_n) <= kMaxSharedBytes;
}

}  // namespace flashjit::attention_backward_space
