#pragma once
// A block mask (Attention::block_mask): what a mask modifier leaves visible, summarized per
// slab of 16 query rows, so the forward skips the key blocks no row of a CTA sees and evaluates
// the modifier only where it can hide something. Shared by the kernel that builds it
// (attention/modifiers/block_mask_kernel.cuh), the forward that reads it and the host.
#include "attention/parts/captures.cuh"

namespace flashjit {

/// Query rows a block-mask entry summarizes (a warp's mma row slab: every Br is a multiple).
constexpr int kBlockMaskRows = 16;
/// Key tiles the builder classifies (every Bc is a multiple).
constexpr int kBlockMaskKeys = 16;

/// One entry, four int32 in this order: keys in [lo, hi) are the only ones the mask modifier
/// lets any row of the slab see (lo >= hi: none), and it lets every row of the slab see every
/// key in [full_lo, full_hi) (the longest such run of whole key tiles; full_lo >= full_hi: none).
enum BlockMaskField : int { kMaskLo = 0, kMaskHi = 1, kMaskFullLo = 2, kMaskFullHi = 3 };

/// The block mask of a call: [batch, heads_q, slabs, 4] int32, slabs = ceil(seqlen_q / 16),
/// unit stride in the last two dimensions; ranges nullptr: none.
struct BlockMaskView {
  const int* ranges;
  index_t batch_stride;
  index_t head_stride;
};

/// Arguments of flashjit::attention_block_mask_kernel: the mask modifier (its template
/// argument) evaluated over (batch, head, query, key), written as BlockMaskView entries.
struct BlockMaskParams {
  int* ranges;
  index_t batch_stride;
  index_t head_stride;
  int slabs;
  int seqlen_q;
  int seqlen_k;
  CaptureTable captures;  // tensors the mask modifier reads (Attention::captures)
};

}  // namespace flashjit
