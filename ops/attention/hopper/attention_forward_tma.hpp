#pragma once
// The TMA forward's tensor maps (AttentionTmaMaps, ops/attention/hopper/tma_forward_traits.cuh),
// described for the executor to encode. Internal to ops/.
#include <cstdint>
#include <string>
#include <vector>

#include "attention/parts/forward_params.cuh"
#include "emulator/ptx_api.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/tensor.hpp"

namespace flashjit::kernels {

/// The maps of Q, K, V and O, in AttentionTmaMaps' order, for a validated call whose kernel
/// arguments are `params`: Q's box of Br = block_m rows, K's and V's of block_n (Bc, or a CTA's
/// share of it in a cluster: Bc / 2).
std::vector<emulator::TensorMap> forward_tma_maps(const AttentionForwardParams& params,
                                                  const Attention& attention, int block_m,
                                                  int block_n);

/// The fp8 forward's TMA form (attention/fp8/fp8_tma_kernel.cuh): Q and K as 16-bit elements
/// of two e4m3 codes (head_dim / 2 a row) in boxes of 64 by block_m and block_n rows under the
/// 128-byte swizzle, V as bytes in boxes of its padded head dim (fp8_tma_space) by block_n rows
/// without swizzle, O bf16 as forward_tma_maps'.
std::vector<emulator::TensorMap> fp8_forward_tma_maps(const AttentionForwardParams& params,
                                                      const Attention& attention, int block_m,
                                                      int block_n);

/// The same for packed sequences (the TMA forward's varlen kernels): Q and O of `total_q` rows,
/// K and V of `total_k`, each as a batch of one. With `kv_e4m3`, K and V are an fp8 cache:
/// maps of bytes, boxes of whole padded rows (tma_forward_padded_head_dim) without swizzle.
std::vector<emulator::TensorMap> packed_tma_maps(const AttentionForwardParams& params,
                                                 const Attention& attention, std::int64_t total_q,
                                                 std::int64_t total_k, int block_m, int block_n,
                                                 bool kv_e4m3 = false);

/// The maps of Q, K, V and dO, in AttentionBackwardTmaMaps' order (the Hopper backward): Q's
/// and dO's box of block_m rows, K's and V's of block_n. Each map's sizes are its view's
/// [batch, seqlen, heads, head_dim]: a packed tensor's kernel view, [1, total, heads, head_dim],
/// gives a map of one batch over every row.
std::vector<emulator::TensorMap> backward_tma_maps(const TensorView& q, const TensorView& k,
                                                   const TensorView& v, const TensorView& dout,
                                                   int block_m, int block_n);

/// The map of the TMA backward's row statistics at `stats` (attention/parts/row_stats.cuh):
/// rank 2 over {kRowStatFloats fp32, `blocks`}, one block a box, no swizzle.
emulator::TensorMap row_stats_tma_map(const float* stats, std::int64_t blocks);

/// The first map the driver's rules reject, named ("k: ..."; the fourth map is `fourth`: o in
/// the forward, dout in the backward), or "" when none.
std::string tma_maps_problem(const std::vector<emulator::TensorMap>& maps,
                             const char* fourth = "o");

}  // namespace flashjit::kernels
