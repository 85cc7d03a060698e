#pragma once
// Which part of the problem one CTA of the forward computes, and where its rows live: the
// sequence (its own lengths and offsets in a variable-length batch), the query rows (with GQA
// packing, (query, head) pairs), the keys (dense or in pages), and with split-KV its share of
// the key blocks and where its partial result goes. A dense batch is FlashAttention-2's
// (row block, head, batch) grid, with no index arithmetic beyond it. Every forward family on
// the inference layouts takes its CTA's part from here (fa2/, wide/, decode/).
#include "attention/parts/block_mask_ranges.cuh"
#include "attention/parts/cache_descale.cuh"
#include "attention/parts/forward_params.cuh"
#include "attention/parts/key_window.cuh"
#include "attention/parts/sequence_layout.cuh"
#include "attention/parts/sequence_span.cuh"

namespace flashjit {

/// KeyWindow for tiles whose rows are packed (query, head) pairs: row p is query p / group.
template <MaskKind Kind>
struct PackedKeyWindow {
  KeyWindow<Kind> keys;
  int group;  // query heads per key/value head

  FJ_DEVICE int lo(int row) const { return keys.lo(row / group); }
  FJ_DEVICE int hi(int row) const { return keys.hi(row / group); }
  FJ_DEVICE BlockRange key_blocks(int first_row, int last_row, int block_n) const {
    return keys.key_blocks(first_row / group, last_row / group, block_n);
  }
  FJ_DEVICE bool block_fully_visible(int first_row, int last_row, int key0, int block_n) const {
    return keys.block_fully_visible(first_row / group, last_row / group, key0, block_n);
  }
};

/// Grid (ceil(rows / kBlockM) · splits, heads, batch): rows is seqlen_q, or seqlen_q ·
/// heads_per_kv with GQA packing, where grid.y is heads_kv instead of heads_q; seqlen_q is the
/// longest sequence's, and CTAs past a shorter one's rows have no rows (rows <= 0).
template <class Traits>
struct ForwardBlock {
  using T = typename Traits::Element;
  using Layout = typename Traits::Layout;

  int batch;
  int head;     // the query head; with GQA packing the group's first (row p adds p % group)
  int kv_head;  // the key/value head it reads
  int group;    // query heads packed per query position: heads_per_kv, or 1 without packing
  int split;    // which share of the key blocks (0 without split-KV)
  int splits;
  int row0;         // the tile's first row: a query, or a packed (query, head) row
  int rows;         // valid rows in the tile; <= 0: none (a shorter sequence of a varlen batch)
  int seqlen_q;     // this sequence's queries
  int seqlen_k;     // this sequence's keys
  index_t q_start;  // the q and o row of the sequence's query 0 (packed sequences), else 0
  index_t k_start;  // the k and v row of its key 0 (packed, or left-padded), else 0; paged:
                    // its key 0's position in its pages (a left pad)
  int kv_batch;     // its batch row of dense k and v, or of the page table
  index_t token0;   // its query 0 in the numbering of SplitOutputs
  // The block mask over the tile's slabs (without one every key may be seen and none is known
  // to be, so a mask modifier is evaluated everywhere).
  MaskedKeys masked;
  // An fp8 cache's factors for this sequence's key/value head (1 for a 16-bit cache).
  float k_descale;
  float v_descale;

  FJ_DEVICE explicit ForwardBlock(const AttentionForwardParams& p) {
    splits = Layout::kSplit ? p.split.splits : 1;
    split = int(blockIdx.x) % splits;
    row0 = int(blockIdx.x) / splits * Traits::kBlockM;
    batch = blockIdx.z;
    group = Layout::kPackGqa ? p.heads_per_kv : 1;
    head = int(blockIdx.y) * group;
    kv_head = head / p.heads_per_kv;
    seqlen_q = p.seqlen_q;
    seqlen_k = p.seqlen_k;
    q_start = 0;
    k_start = 0;
    kv_batch = batch;
    token0 = index_t(batch) * p.seqlen_q;
    if constexpr (Layout::kVarlen) read_lengths(p.sequences);
    k_descale = Layout::kKvE4m3 ? descale_at(p.sequences.k_descale, batch, kv_head) : 1.0f;
    v_descale = Layout::kKvE4m3 ? descale_at(p.sequences.v_descale, batch, kv_head) : 1.0f;
    rows = min_int(Traits::kBlockM, seqlen_q * group - row0);
    // (A block mask comes with dense batches only: the tile's rows are its queries.)
    masked = rows > 0 ? masked_keys(p.block_mask, batch, head, row0, rows, seqlen_k)
                      : MaskedKeys{0, seqlen_k, 0, 0};
  }

  /// The mask over this sequence's lengths, as the tile's rows see it.
  FJ_DEVICE auto window(const AttentionForwardParams& p) const {
    const KeyWindow<Traits::kMask> keys(p, seqlen_q, seqlen_k);
    if constexpr (Layout::kPackGqa) {
      return PackedKeyWindow<Traits::kMask>{keys, group};
    } else {
      return keys;
    }
  }

  /// The key blocks this CTA visits: those its rows see, or with split-KV its share of them
  /// (contiguous, as even as whole blocks allow; possibly none).
  template <class Window>
  FJ_DEVICE BlockRange key_blocks(const Window& window) const {
    const BlockRange all = masked.key_blocks<Traits::kBlockN>(  // what the block mask leaves
        window.key_blocks(row0, row0 + rows - 1, Traits::kBlockN));
    if (!Layout::kSplit || all.empty()) return all;
    const int share = ceil_div(all.end - all.begin, splits);
    const int begin = min_int(all.begin + split * share, all.end);
    return {begin, min_int(begin + share, all.end)};
  }

  /// Whether the mask modifier must be evaluated on key block [key0, key0 + kBlockN): not where
  /// the block mask says every row of the tile sees every key.
  FJ_DEVICE bool mask_needed(int key0) const {
    return !(key0 >= masked.full_lo && key0 + Traits::kBlockN <= masked.full_hi);
  }

  /// The query of tile row r, and its head.
  FJ_DEVICE int query(int r) const { return Layout::kPackGqa ? (row0 + r) / group : row0 + r; }
  FJ_DEVICE int query_head(int r) const {
    return Layout::kPackGqa ? head + (row0 + r) % group : head;
  }

  /// Tile row r's fp32 partial O row and partial LSE under split-KV (SplitOutputs), and its
  /// LSE (p.lse, which must be set) otherwise.
  FJ_DEVICE float* partial_o_row(const AttentionForwardParams& p, int r) const {
    return partial_o_row(p, r, split);
  }
  FJ_DEVICE float* partial_lse_at(const AttentionForwardParams& p, int r) const {
    return partial_lse_at(p, r, split);
  }
  /// The same rows of split `of_split`'s partials (the merge reads every split's).
  FJ_DEVICE float* partial_o_row(const AttentionForwardParams& p, int r, int of_split) const {
    const SplitOutputs& out = p.split;
    return out.o + of_split * out.o_split_stride + (token0 + query(r)) * out.o_token_stride +
           index_t(query_head(r)) * p.head_dim_v;
  }
  FJ_DEVICE float* partial_lse_at(const AttentionForwardParams& p, int r, int of_split) const {
    const SplitOutputs& out = p.split;
    return out.lse + of_split * out.lse_split_stride + (token0 + query(r)) * out.lse_token_stride +
           query_head(r);
  }
  FJ_DEVICE float* lse_at(const AttentionForwardParams& p, int r) const {
    return p.lse + batch * p.lse_batch_stride + query_head(r) * p.lse_head_stride + q_start +
           query(r);
  }

  /// Tile row r's row of q (or o).
  template <typename U>
  FJ_DEVICE U* query_row(const HeadTensor& t, int r) const {
    return t.rows<U>(batch, query_head(r), int(q_start + query(r)));
  }
  /// Where key j sits in the sequence's pages: its position past the left pad.
  FJ_DEVICE int paged_position(int j) const { return int(k_start) + j; }
  /// The sequence's row of the page table (its cache row, cache_batch_idx's).
  FJ_DEVICE index_t page_table_row(const SequenceIndex& s) const {
    return index_t(kv_batch) * s.page_table_stride;
  }

  /// Key j's row of k (or v), of U (T, or an fp8 cache's bytes): in the sequence's page, or at
  /// its offset.
  template <typename U = T>
  FJ_DEVICE const U* key_row(const HeadTensor& t, const SequenceIndex& s, int j) const {
    if constexpr (Layout::kPaged) {
      const int position = paged_position(j);
      const int page = load_global_index(s.page_table, page_table_row(s) + position / s.page_size);
      return t.rows<const U>(page, kv_head, position % s.page_size);
    } else {
      return t.rows<const U>(kv_batch, kv_head, int(k_start + j));
    }
  }

 private:
  FJ_DEVICE void read_lengths(const SequenceIndex& s) {
    if (s.cu_seqlens_q != nullptr) {
      const SequenceSpan queries = sequence_span(s.cu_seqlens_q, batch);
      q_start = queries.start;
      seqlen_q = queries.length;
      token0 = q_start;
    }
    if (s.seqused_q != nullptr) seqlen_q = load_global_index(s.seqused_q, batch);
    if (!Layout::kPaged && s.cu_seqlens_k != nullptr) {
      const SequenceSpan keys = sequence_span(s.cu_seqlens_k, batch);
      k_start = keys.start;
      seqlen_k = keys.length;
    }
    if (s.seqlens_k != nullptr) seqlen_k = load_global_index(s.seqlens_k, batch);
    if (s.kv_batch_idx != nullptr) kv_batch = load_global_index(s.kv_batch_idx, batch);
    if (s.leftpad_k != nullptr) {
      k_start = load_global_index(s.leftpad_k, batch);
      seqlen_k -= int(k_start);  // seqlens_k counted the padding
    }
  }
};

}  // namespace flashjit
