#pragma once
// The Hopper forward's configuration space and validity predicates (wgmma_forward_kernel.cuh).
// The host includes this file to enumerate, check and size configs; the kernel's traits
// static_assert the same predicates.
#include "attention/fa2/forward_space.cuh"
#include "tile/shared_layout.cuh"

namespace flashjit {

/// Whether the Hopper forward takes (head_dim, Br, Bc): Br a whole number (1 to 3) of 64-row
/// warpgroups, Bc a multiple of 16 up to wgmma's N of 256, and a head dim whose padded width
/// is also a wgmma N (the N of O += P V).
constexpr bool wgmma_forward_valid(int head_dim, int block_m, int block_n) {
  const int padded = attention_forward_space::padded_head_dim(head_dim);
  return attention_forward_space::head_dim_supported(head_dim) && padded <= 256 &&
         block_m % 64 == 0 && block_m >= 64 && block_m <= 192 && block_n % 16 == 0 &&
         block_n >= 16 && block_n <= 256;
}

/// Bytes of dynamic shared memory: Q, K and V in wgmma's layout, and O's staging tile.
constexpr int wgmma_forward_shared_bytes(int head_dim, int block_m, int block_n) {
  const int padded = attention_forward_space::padded_head_dim(head_dim);
  return (block_m + 2 * block_n) * padded * 2 + block_m * shared_row_stride(padded) * 2;
}

/// The configs the runtime offers on sm_90a (a subset of wgmma_forward_valid): Br 64 or 128
/// (one or two warpgroups of 4 warps), one K/V stage, and Bc and the padded head dim each 64
/// or 128, the N values tile/wgmma.cuh's device PTX is written for.
constexpr bool wgmma_forward_config_valid(int head_dim, int block_m, int block_n, int warps,
                                          int stages) {
  const int padded = attention_forward_space::padded_head_dim(head_dim);
  return wgmma_forward_valid(head_dim, block_m, block_n) && (block_m == 64 || block_m == 128) &&
         (block_n == 64 || block_n == 128) && (padded == 64 || padded == 128) &&
         warps == block_m / 16 && stages == 1 &&
         wgmma_forward_shared_bytes(head_dim, block_m, block_n) <=
             attention_forward_space::kMaxSharedBytes;
}

}  // namespace flashjit
