#pragma once
// Reading a block mask (attention/parts/block_mask_params.cuh) in the kernels that skip what it
// hides: the forward and the backward's dQ kernel over one query block's keys, the backward's dK/dV
// kernels over one key block's queries.
#include "attention/parts/block_mask_params.cuh"
#include "attention/parts/key_window.cuh"
#include "tile/memory.cuh"

namespace flashjit {

/// What a block mask says of query rows [row0, row0 + rows) of one (batch, head) (a whole
/// number of slabs, or the sequence's last): keys in [lo, hi) are the only ones any of them may
/// see (lo >= hi: none), and all of them see every key of [full_lo, full_hi).
struct MaskedKeys {
  int lo, hi, full_lo, full_hi;

  /// `blocks` (of BlockN keys) cut to those [lo, hi) reaches.
  template <int BlockN>
  FJ_DEVICE BlockRange key_blocks(BlockRange blocks) const {
    blocks.begin = max_int(blocks.begin, lo / BlockN);
    blocks.end = min_int(blocks.end, hi <= lo ? 0 : ceil_div(hi, BlockN));
    return blocks;
  }
};

/// The entries of `m` for one (batch, head).
FJ_DEVICE const int* block_mask_entries(const BlockMaskView& m, int batch, int head) {
  return m.ranges + index_t(batch) * m.batch_stride + index_t(head) * m.head_stride;
}

/// MaskedKeys of rows [row0, row0 + rows) of (batch, head) from the mask's slabs: the union of
/// what they see, the intersection of what they see whole. Without a block mask: every key of
/// the sequence's `seqlen_k` may be seen, none is known to be.
FJ_DEVICE MaskedKeys masked_keys(const BlockMaskView& m, int batch, int head, int row0, int rows,
                                 int seqlen_k) {
  if (m.ranges == nullptr) return {0, seqlen_k, 0, 0};
  const int* entries = block_mask_entries(m, batch, head);
  MaskedKeys keys{seqlen_k, 0, 0, seqlen_k};
  for (int slab = row0 / kBlockMaskRows; slab * kBlockMaskRows < row0 + rows; ++slab) {
    const int* entry = entries + index_t(slab) * 4;
    keys.lo = min_int(keys.lo, load_global_index(entry, kMaskLo));
    keys.hi = max_int(keys.hi, load_global_index(entry, kMaskHi));
    keys.full_lo = max_int(keys.full_lo, load_global_index(entry, kMaskFullLo));
    keys.full_hi = min_int(keys.full_hi, load_global_index(entry, kMaskFullHi));
  }
  return keys;
}

/// `blocks` (query blocks of BlockM rows, of `seqlen_q` queries) cut to the first through the
/// last whose rows may see a key of [key0, key_end) in some query head of [head0, head0 +
/// heads): the backward's dK/dV kernels visit those (a block between them that sees none adds
/// exactly zero). Unchanged without a block mask. Every thread reads the same entries (from
/// the cache after the first): one pass from each end over the slabs, stopping at the first
/// that sees a key.
template <int BlockM>
FJ_DEVICE BlockRange query_blocks_seeing(const BlockMaskView& m, int batch, int head0, int heads,
                                         int key0, int key_end, int seqlen_q, BlockRange blocks) {
  static_assert(BlockM % kBlockMaskRows == 0, "a query block is whole slabs");
  if (m.ranges == nullptr || blocks.empty()) return blocks;
  constexpr int kSlabs = BlockM / kBlockMaskRows;  // per query block
  const int first_slab = blocks.begin * kSlabs;
  const int end_slab = min_int(blocks.end * kSlabs, ceil_div(seqlen_q, kBlockMaskRows));
  const auto sees = [&](int slab) {
    for (int head = head0; head < head0 + heads; ++head) {
      const int* entry = block_mask_entries(m, batch, head) + index_t(slab) * 4;
      const int lo = load_global_index(entry, kMaskLo), hi = load_global_index(entry, kMaskHi);
      if (lo < hi && lo < key_end && hi > key0) return true;
    }
    return false;
  };
  int begin = first_slab;
  while (begin < end_slab && !sees(begin)) ++begin;
  if (begin == end_slab) return {blocks.begin, blocks.begin};  // no row sees these keys
  int end = end_slab;
  while (!sees(end - 1)) --end;
  return {begin / kSlabs, ceil_div(end, kSlabs)};
}

}  // namespace flashjit
