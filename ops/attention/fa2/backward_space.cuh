#pragma once
// The backward kernels' configuration spaces and validity predicates (host and device), beside
// the templates that static_assert them. Two kernels, two spaces:
//  - the key-major dK/dV kernel (every call): Bc keys per CTA, query blocks of Br rows streamed
//    past them through `stages` buffers; its warps split each product in two dimensions
//    (tile/warp_grid.cuh). In the default mode it adds dQ too, atomically.
//  - the query-major dQ kernel (deterministic calls only): Br query rows per CTA, key blocks of
//    Bc streamed past them; each warp owns Br / warps rows.
#include "attention/fa2/forward_space.cuh"
#include "tile/warp_grid.cuh"

namespace flashjit::attention_backward_space {

using attention_forward_space::head_dim_supported;
using attention_forward_space::padded_head_dim;

constexpr int kMmaRows = 16;
/// Query rows per block of the delta pre-pass (one warp each); the host sizes its grid by it.
constexpr int kDeltaRowsPerBlock = 4;
/// Per-thread fp32 accumulators above which the kernels spill.
constexpr int kMaxAccumulatorsPerThread = 176;
constexpr int kMaxSharedBytes = attention_forward_space::kMaxSharedBytes;

/// Bytes of one shared row of `cols` 16-bit elements (padded, tile/shared_layout.cuh).
constexpr int shared_row_bytes(int cols) { return shared_row_stride(cols) * 2; }

// ---- The dK/dV kernel ----------------------------------------------------------------------

/// The head dim the dK/dV kernel's tiles use (zero-filled past the real one): a multiple of the
/// mma's 16, and above 96 of 32, so that the warps can split it in two. With an odd number of
/// 16-column steps, head dims 136 to 240 had no config within sm_80's shared memory, and 104
/// and 112 only tiles that spilled (56 and 100 bytes on sm_90a with 4 warps, NVRTC 13.0).
constexpr int key_kernel_head_dim(int head_dim) {
  return head_dim <= 96 ? padded_head_dim(head_dim) : (head_dim + 31) / 32 * 32;
}

constexpr int kKeyBlockM[] = {32, 64, 128};  // query rows per streamed block (Br)
constexpr int kKeyBlockN[] = {32, 64, 128};  // keys per CTA (Bc)
constexpr int kKeyWarps[] = {2, 4, 8};
constexpr int kKeyStages[] = {1, 2};  // Q/dO buffers: 2 loads block i + 1 during block i

/// Columns of a warp's atomic dQ block computed per pass (of its `cols`): at most 64, so dQ's
/// registers stay few beside dK and dV at wide head dims.
constexpr int dq_pass_cols(int cols) {
  return cols <= 64 ? cols : cols % 64 == 0 ? 64 : cols % 32 == 0 ? 32 : 16;
}

/// Per-thread fp32 accumulators of the dK/dV kernel: dK and dV (Bc x head dim) for the whole
/// loop, plus the larger of a step's Sᵀ and dPᵀ (Bc x Br; the softcap keeps tanh's slope too)
/// and, with atomic dQ, one pass of a warp's dQ block (dq_pass_cols), spread over its lanes.
constexpr int key_kernel_accumulators(int head_dim, int block_m, int block_n, int warps,
                                      bool softcap, bool atomic_dq) {
  const int threads = warps * 32;
  const int d = key_kernel_head_dim(head_dim);
  const int gradients = 2 * block_n * d / threads;
  const int scores = (softcap ? 3 : 2) * block_n * block_m / threads;
  const int dq_row_warps = grid_row_warps(block_m, warps);
  const int dq_cols = dq_pass_cols(d / (warps / (dq_row_warps > 0 ? dq_row_warps : 1)));
  const int dq = atomic_dq && dq_row_warps > 0 ? block_m / dq_row_warps * dq_cols / 32 : 0;
  return gradients + (scores > dq ? scores : dq);
}

/// Shared memory of the dK/dV kernel: K and V (Bc rows), Q and dO (Br rows) per stage, and Pᵀ
/// and dSᵀ (Bc x Br).
constexpr int key_kernel_shared_bytes(int head_dim, int block_m, int block_n, int stages) {
  const int row = shared_row_bytes(key_kernel_head_dim(head_dim));
  return 2 * block_n * row + 2 * stages * block_m * row + 2 * block_n * shared_row_bytes(block_m);
}

constexpr bool key_kernel_valid(int head_dim, int block_m, int block_n, int warps, int stages,
                                bool softcap, bool atomic_dq) {
  const int d = key_kernel_head_dim(head_dim);
  return head_dim_supported(head_dim) && (warps == 2 || warps == 4 || warps == 8) &&
         (stages == 1 || stages == 2) && block_m % kMmaRows == 0 && block_n % kMmaRows == 0 &&
         warp_grid_fits(block_n, block_m, warps) &&  // Sᵀ, dPᵀ
         warp_grid_fits(block_n, d, warps) &&        // dK, dV
         (!atomic_dq || warp_grid_fits(block_m, d, warps)) &&
         key_kernel_accumulators(head_dim, block_m, block_n, warps, softcap, atomic_dq) <=
             kMaxAccumulatorsPerThread &&
         key_kernel_shared_bytes(head_dim, block_m, block_n, stages) <= kMaxSharedBytes;
}

// ---- The dQ kernel -------------------------------------------------------------------------

constexpr int kQueryBlockM[] = {32, 64, 128};  // query rows per CTA (Br)
constexpr int kQueryBlockN[] = {32, 64, 128};  // keys per streamed block (Bc)
constexpr int kQueryWarps[] = {2, 4, 8};
constexpr int kQueryStages = 2;  // K and V double-buffered (K is read twice per block)

/// Per-thread fp32 accumulators of the dQ kernel: dQ (rows x head dim), S and dP (rows x Bc;
/// the softcap's slope too), per warp of Br / warps rows.
constexpr int query_kernel_accumulators(int head_dim, int block_m, int block_n, int warps,
                                        bool softcap) {
  const int rows = block_m / warps;
  return rows * (padded_head_dim(head_dim) + (softcap ? 3 : 2) * block_n) / 32;
}

/// Shared memory of the dQ kernel: Q and dO (Br rows), K and V (Bc rows) per stage.
constexpr int query_kernel_shared_bytes(int head_dim, int block_m, int block_n) {
  const int row = shared_row_bytes(padded_head_dim(head_dim));
  return 2 * block_m * row + 2 * kQueryStages * block_n * row;
}

constexpr bool query_kernel_valid(int head_dim, int block_m, int block_n, int warps, bool softcap) {
  return head_dim_supported(head_dim) && (warps == 2 || warps == 4 || warps == 8) &&
         block_m % (warps * kMmaRows) == 0 && block_n % kMmaRows == 0 &&
         query_kernel_accumulators(head_dim, block_m, block_n, warps, softcap) <=
             kMaxAccumulatorsPerThread &&
         query_kernel_shared_bytes(head_dim, block_m, block_n) <= kMaxSharedBytes;
}

}  // namespace flashjit::attention_backward_space
