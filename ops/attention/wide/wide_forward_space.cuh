#pragma once
// The wide forward's configuration space (attention/wide/wide_forward_kernel.cuh): head dims past
// the mma.sync forward's 256, up to DeepSeek's MLA in absorbed decoding (576 for Q and K, 512
// for V and O). The host includes this file to enumerate, check and name configs; the kernel
// static_asserts the same predicate.
#include "tile/shared_layout.cuh"

namespace flashjit::wide_forward_space {

/// Query rows per CTA (Br), keys per iteration (Bc), warps splitting O's columns per 16-row
/// slab (column groups), K/V pipeline stages.
constexpr int kBlockM[] = {32, 64};
constexpr int kBlockN[] = {32, 64};
constexpr int kColumnGroups[] = {2, 4};
constexpr int kStages[] = {1, 2};

constexpr int kMinHeadDim = 8;
constexpr int kMaxHeadDim = 576;  // MLA's absorbed Q and K: 512 latent + 64 rotary columns
constexpr int kSlabRows = 16;     // mma.sync m16n8k16: a warp's rows
constexpr int kMaxWarps = 16;
/// The register file of an SM (32-bit registers) and what a thread keeps besides its fp32
/// accumulators (addresses, indices, the softmax statistics): a config whose accumulators
/// leave less spills.
constexpr int kRegisterFile = 65536;
constexpr int kOtherRegisters = 64;
constexpr int kMaxSharedBytes = 227 * 1024;  // sm_90's opt-in limit

constexpr bool head_dims_supported(int head_dim, int head_dim_v) {
  return head_dim >= kMinHeadDim && head_dim <= kMaxHeadDim && head_dim % 8 == 0 &&
         head_dim_v >= kMinHeadDim && head_dim_v <= head_dim && head_dim_v % 8 == 0;
}

/// A head dim as the tiles hold it: whole m16n8k16 steps in each column group's share (zero
/// past the real columns).
constexpr int padded_head_dim(int head_dim, int groups) {
  const int unit = 16 * groups;
  return (head_dim + unit - 1) / unit * unit;
}

constexpr int warps(int block_m, int groups) { return block_m / kSlabRows * groups; }

/// Per-thread fp32 accumulators of a warp: its 16 rows of S over Bc / groups keys and of O over
/// head_dim_v / groups columns.
constexpr int accumulators_per_thread(int head_dim_v, int block_n, int groups) {
  return kSlabRows * (block_n + padded_head_dim(head_dim_v, groups)) / groups / 32;
}

/// Dynamic shared memory: the Q tile, `stages` K tiles and, unless V is in the keys, `stages`
/// V tiles (the key/value pipeline's), then the P tile the warps of a slab share and the
/// per-(group, row) exchange of the row maxima and sums.
constexpr int shared_bytes(int head_dim, int block_m, int block_n, int groups, int stages,
                           bool values_in_keys) {
  const int row = shared_row_stride(padded_head_dim(head_dim, groups)) * 2;
  const int kv_tiles = (values_in_keys ? 1 : 2) * stages;
  return block_m * row + kv_tiles * block_n * row + block_m * shared_row_stride(block_n) * 2 +
         groups * block_m * 4;
}

constexpr bool config_valid(int head_dim, int head_dim_v, int block_m, int block_n, int groups,
                            int stages, bool values_in_keys) {
  const int threads = warps(block_m, groups) * 32;
  const int budget = (kRegisterFile / (threads > 0 ? threads : 1) > 255
                          ? 255
                          : kRegisterFile / (threads > 0 ? threads : 1)) -
                     kOtherRegisters;
  return head_dims_supported(head_dim, head_dim_v) && (groups == 2 || groups == 4) &&
         (block_m == 32 || block_m == 64) && block_n % (16 * groups) == 0 && block_n >= 32 &&
         warps(block_m, groups) <= kMaxWarps && (stages == 1 || stages == 2) &&
         (!values_in_keys || stages == 2) &&
         accumulators_per_thread(head_dim_v, block_n, groups) <= budget &&
         shared_bytes(head_dim, block_m, block_n, groups, stages, values_in_keys) <=
             kMaxSharedBytes;
}

}  // namespace flashjit::wide_forward_space

namespace flashjit::wide_forward_space {

/// The wide forward on wgmma (sm_90a, wide_wgmma_kernel.cuh): one 64-row tile, 64 keys a block,
/// two blocks of K in flight, two consumer warpgroups each holding half of O's columns, V read
/// from the keys (MLA's latent cache). Its tiles are 128-byte-swizzled panels of 64 columns,
/// and each warpgroup's half of O is one wgmma N (at most 256).
constexpr int kWgmmaBlockM = 64;
constexpr int kWgmmaBlockN = 64;
constexpr int kWgmmaStages = 2;
constexpr int kWgmmaGroups = 2;  // consumer warpgroups, each half of O's columns
constexpr int kWgmmaWarps = 8;

/// Dynamic shared memory of the wgmma form: 1024 bytes of slack to align the swizzled tiles, Q,
/// two K slots, P (64 × 64), one float a row (the rescale factors, then 1/ℓ) and two blocks'
/// page indices (64 a block at most: pages of one key).
constexpr int wgmma_shared_bytes(int head_dim) {
  return 1024 + (kWgmmaBlockM + kWgmmaStages * kWgmmaBlockN) * head_dim * 2 +
         kWgmmaBlockM * kWgmmaBlockN * 2 + kWgmmaBlockM * 4 + kWgmmaStages * kWgmmaBlockN * 4;
}

constexpr bool wgmma_head_dims_supported(int head_dim, int head_dim_v) {
  return head_dims_supported(head_dim, head_dim_v) && head_dim % 64 == 0 &&
         head_dim_v % (64 * kWgmmaGroups) == 0 && head_dim_v / kWgmmaGroups <= 256;
}

constexpr bool wgmma_config_valid(int head_dim, int head_dim_v, int block_m, int block_n,
                                  int groups, int stages, bool values_in_keys) {
  return wgmma_head_dims_supported(head_dim, head_dim_v) && block_m == kWgmmaBlockM &&
         block_n == kWgmmaBlockN && groups == kWgmmaGroups && stages == kWgmmaStages &&
         values_in_keys && wgmma_shared_bytes(head_dim) <= kMaxSharedBytes;
}

}  // namespace flashjit::wide_forward_space
