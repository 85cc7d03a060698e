#pragma once
// The forward for head dims past the mma.sync forward's 256, up to DeepSeek's MLA in absorbed
// decoding (Q and K 576 wide, V and O 512). One warp's 16 rows of O over 512 columns would take
// 256 fp32 registers a thread, so the warps of a 16-row slab split O's columns into groups
// (kColumnGroups) and the scores' keys likewise: warp (slab, group) computes S for its slab
// and its share of the block's keys, the slab's warps agree on each row's maximum through
// shared memory, write their P into a shared tile, and each then adds P V for its own share of
// V's columns over all the block's keys. The online softmax (docs/design.md) is the
// forward kernel's; only the maximum and the final sum are exchanged. Layouts (variable
// lengths, pages, GQA packing, split-KV) are ForwardBlock's, as in attention/forward_kernel.cuh.
// With V in the keys (MLA's latent cache: V is K's first 512 columns), K's blocks are loaded
// once and serve both products.
#include "attention/fa2/forward_rows.cuh"
#include "attention/parts/forward_softmax.cuh"
#include "attention/parts/mask.cuh"
#include "attention/wide/wide_forward_traits.cuh"
#include "tile/gemm.cuh"

namespace flashjit {

/// Where the warps of a slab meet: one float per (column group, tile row), in shared memory.
template <int BlockM, int Groups>
struct RowExchange {
  static constexpr int kBytes = Groups * BlockM * 4;
  float* data;  // [Groups][BlockM]

  /// Each row's largest value over the slab's groups, from this warp's `mine` (its rows
  /// [warp_row0, warp_row0 + 16), as row_max leaves it: the same on a quad's lanes). A block
  /// barrier lies between the writes and the reads; the next writes come after the caller's
  /// next barrier. `combine` folds two groups' values (max, or + for the sums).
  template <class Combine>
  FJ_DEVICE row_vec<16> all_groups(const row_vec<16>& mine, int warp_row0, int group, int lane,
                                   Combine combine) const {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_row0 + fragment_row(0, half, lane);
      if (lane % 4 == 0) store_shared(data, group * BlockM + row, mine.v[half]);
    }
    __syncthreads();
    row_vec<16> all;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_row0 + fragment_row(0, half, lane);
      all.v[half] = load_shared(data, row);
#pragma unroll
      for (int g = 1; g < Groups; ++g) {
        all.v[half] = combine(all.v[half], load_shared(data, g * BlockM + row));
      }
    }
    return all;
  }
};

/// Writes the block's finished rows, each warp its columns [column0, column0 + Cols) of them:
/// O (normalized, through the staging tile, then whole 16-byte chunks by the block) and LSE
/// (group 0's warps), or with split-KV the fp32 partials, where ForwardBlock puts the layout's
/// rows.
template <class Traits, int Cols, class Staging>
FJ_DEVICE void store_wide_outputs(const ForwardBlock<Traits>& block,
                                  const AttentionForwardParams& p, acc_tile<16, Cols>& o,
                                  const row_vec<16>& lse, Staging staging, int warp_row0,
                                  int column0, int group, int lane) {
  using T = typename Traits::Element;
  if constexpr (Traits::Layout::kSplit) {
    store_rows_fp32(
        o, [&](int r) { return block.partial_o_row(p, r) + column0; }, warp_row0, block.rows,
        p.head_dim_v - column0, lane);
    if (group != 0) return;
    store_lse_to(
        lse, [&](int r) { return block.partial_lse_at(p, r); }, warp_row0, block.rows, lane);
  } else {
    store_fragments(o, staging, warp_row0, column0, lane);
    __syncthreads();  // every group's columns of every row are staged
    store_rows_from_shared_to<Traits::kBlockM, Traits::kHeadDimVPadded, Traits::kThreads>(
        [&](int r) { return block.template query_row<T>(p.o, r); }, staging, 0, block.rows,
        int(threadIdx.x), p.head_dim_v);
    if (p.lse == nullptr || group != 0) return;
    store_lse_to(
        lse, [&](int r) { return block.lse_at(p, r); }, warp_row0, block.rows, lane);
  }
}

/// Grid as the forward kernel's (ForwardBlock), block kThreads, dynamic shared memory
/// Traits::kSharedBytes.
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads)
    attention_forward_wide_kernel(AttentionForwardParams params) {
  using T = typename Traits::Element;
  constexpr int kGroups = Traits::kColumnGroups;
  constexpr int kKeys = Traits::kBlockN / kGroups;             // a warp's keys of S
  constexpr int kColumns = Traits::kHeadDimVPadded / kGroups;  // a warp's columns of O
  const ForwardBlock<Traits> block(params);
  if (block.rows <= 0) return;  // past a shorter sequence's rows: nothing to do
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warp_row0 = warp / kGroups * 16;  // the slab's first row in the block
  const int group = warp % kGroups;
  const int key_col0 = group * kKeys, column0 = group * kColumns;
  const int row0 = block.row0, rows = block.rows;
  const auto window = block.window(params);
  const BlockRange blocks = block.key_blocks(window);

  using Pipeline = KeyValuePipeline<Traits, decltype(forward_rows(block, params))>;
  Pipeline pipeline(forward_rows(block, params), blocks.end);
  unsigned char* shared = dynamic_shared<unsigned char>() + Pipeline::kBytes;
  const auto p_tile = carve_tile<smem_tile<T, Traits::kBlockM, Traits::kBlockN>>(shared);
  const RowExchange<Traits::kBlockM, kGroups> exchange{reinterpret_cast<float*>(shared)};
  const auto larger = [](float a, float b) { return a > b ? a : b; };

  acc_tile<16, kColumns> o;  // this warp's columns of the slab's unnormalized output
  fill(o, 0.0f);
  OnlineSoftmax<16> softmax;  // m (the slab's, the same in every group), ℓ (this group's keys)
  if (!blocks.empty()) pipeline.start(rows, blocks.begin);
  for (int block_n = blocks.begin; block_n < blocks.end; ++block_n) {
    const int key0 = block_n * Traits::kBlockN;
    acc_tile<16, kKeys> s;  // scores of this warp's keys, then their probabilities
    fill(s, 0.0f);
    const auto keys = pipeline.await_keys(block_n);
    mma_abt(s, pipeline.q, warp_row0, keys, key_col0, lane);  // S = Q Kᵀ
    cap_scores<Traits::kSoftcap>(s, params);                  // softcap
    if (!window.block_fully_visible(row0, row0 + rows - 1, key0, Traits::kBlockN)) {
      mask_scores(window, s, row0 + warp_row0, key0 + key_col0, lane);  // S = −inf where masked
    }
    row_vec<16> block_max = softmax.max;
    row_max(s, block_max);  // over this group's keys; then over the slab's
    const row_vec<16> new_max = exchange.all_groups(block_max, warp_row0, group, lane, larger);
    mul_row(o, softmax.fold_to(s, new_max, exponent_scale<Traits::kSoftcap>(params)));
    store_fragments(s, p_tile, warp_row0, key_col0, lane);  // P, rounded as the product reads it
    __syncthreads();                                        // the slab's P is whole
    mma_ab(o, p_tile, warp_row0, pipeline.await_values(block_n), column0, lane);  // O += P V
  }
  quad_sum(softmax.sum);  // ℓ over this group's keys, then over the slab's
  const auto add = [](float a, float b) { return a + b; };
  softmax.sum = exchange.all_groups(softmax.sum, warp_row0, group, lane, add);
  const row_vec<16> lse =
      softmax.finish_summed(o, exponent_scale<Traits::kSoftcap>(params));  // O /= ℓ
  store_wide_outputs(block, params, o, lse, pipeline.q, warp_row0, column0, group, lane);
}

}  // namespace flashjit
