#pragma once
// The decode kernel's configuration space (attention/decode/decode_kernel.cuh): the host
// includes this file to enumerate, check and size configs, and the kernel static_asserts the
// same predicate. Includes nothing but the shared row layout, so host code can use it.
#include "tile/shared_layout.cuh"

namespace flashjit::attention_decode_space {

/// Packed (query, head) rows of a CTA, all of them held by every warp (decoding's GQA group
/// times its few query tokens): the products' small dimension, 8 columns an mma, so a group of 8
/// with one token fills one.
constexpr int kRows[] = {8, 16, 32};
/// The tile rows for a call's packed rows: the fewest that hold them.
constexpr int tile_rows(long long rows) { return rows <= 8 ? 8 : rows <= 16 ? 16 : 32; }
/// Keys of one warp's chunk: the unit a warp loads, scores and folds in.
constexpr int kKeys[] = {16, 32};
/// Warps per CTA, each streaming its own chunks through its own ring.
constexpr int kWarps[] = {2, 4, 8};
/// Chunks in each warp's ring: stages − 1 are in flight while the warp computes on one.
constexpr int kStages[] = {2, 3, 4, 5, 6};

constexpr int kMaxHeadDim = 256;
constexpr int kMaxSplits = 64;  // the split merge's weights in shared memory (kMaxSplits there)
/// The largest dynamic shared memory any supported GPU grants a block (sm_90: 227 KB).
constexpr int kMaxSharedBytes = 227 * 1024;
/// Per-thread fp32 accumulators (O and S) and Q registers the kernel may hold without spilling.
constexpr int kMaxRegistersPerThread = 168;

constexpr int padded_head_dim(int head_dim) { return (head_dim + 15) / 16 * 16; }
constexpr int row_bytes(int head_dim) { return shared_row_stride(padded_head_dim(head_dim)) * 2; }

/// One warp's ring slot: a K and a V chunk (16-bit rows, or fp8 bytes unpadded) and the
/// chunk's page indices.
constexpr int stage_bytes(int head_dim, int keys, bool kv_e4m3 = false) {
  return 2 * keys * (kv_e4m3 ? padded_head_dim(head_dim) : row_bytes(head_dim)) + keys * 4;
}

/// One warp's ring: its slots, and with an fp8 cache the 16-bit K and V tiles each chunk is
/// converted into.
constexpr int ring_bytes(int head_dim, int keys, int stages, bool kv_e4m3 = false) {
  return stages * stage_bytes(head_dim, keys, kv_e4m3) +
         (kv_e4m3 ? 2 * keys * row_bytes(head_dim) : 0);
}

/// Floats between the rows of a warp's O in the merge: its columns and 8 more.
constexpr int merge_row_stride(int head_dim) { return padded_head_dim(head_dim) + 8; }

/// The merges at the end, in the rings' place: each warp's fp32 O rows and LSEs, the warps'
/// weights, the rows' LSE, the split merge's weights and the last split's flag.
constexpr int merge_bytes(int head_dim, int rows, int warps) {
  return warps * rows * merge_row_stride(head_dim) * 4 + 2 * warps * rows * 4 + rows * 4 +
         rows * kMaxSplits * 4 + 16;
}

constexpr int max_int(int a, int b) { return a > b ? a : b; }

/// Bytes of dynamic shared memory: the Q tile, then the warps' rings (or, once they are done,
/// the merges).
constexpr int shared_bytes(int head_dim, int rows, int keys, int warps, int stages,
                           bool kv_e4m3 = false) {
  return rows * row_bytes(head_dim) + max_int(warps * ring_bytes(head_dim, keys, stages, kv_e4m3),
                                              merge_bytes(head_dim, rows, warps));
}

/// Per-thread fp32 accumulators of a warp's O (rows × head dim) and S (rows × keys).
constexpr int accumulators_per_thread(int head_dim, int rows, int keys) {
  return rows * (padded_head_dim(head_dim) + keys) / 32;
}

/// Whether each warp keeps Q in registers (rows × head dim 16-bit elements over 32 lanes)
/// rather than reading it from the shared tile for every chunk.
constexpr bool q_in_registers(int head_dim, int rows, int keys) {
  return accumulators_per_thread(head_dim, rows, keys) + rows * padded_head_dim(head_dim) / 64 <=
         kMaxRegistersPerThread;
}

template <int N>
constexpr bool contains(const int (&values)[N], int value) {
  for (int v : values) {
    if (v == value) return true;
  }
  return false;
}

constexpr bool config_valid(int head_dim, int rows, int keys, int warps, int stages,
                            bool kv_e4m3 = false) {
  return head_dim >= 8 && head_dim <= kMaxHeadDim && head_dim % (kv_e4m3 ? 16 : 8) == 0 &&
         contains(kRows, rows) && contains(kKeys, keys) && contains(kWarps, warps) &&
         contains(kStages, stages) &&
         accumulators_per_thread(head_dim, rows, keys) <= kMaxRegistersPerThread &&
         shared_bytes(head_dim, rows, keys, warps, stages, kv_e4m3) <= kMaxSharedBytes;
}

}  // namespace flashjit::attention_decode_space
