#pragma once
// The wide wgmma forward's loads (wide_wgmma_kernel.cuh): the key blocks of the latent cache
// into two 128-byte-swizzled slots by cp.async from one warpgroup, one block ahead of the block
// the warpgroups multiply. A paged cache's page indices come a block earlier still,
// in the commit group of the block before theirs, so when a block's copies are issued its
// indices are in shared memory: no global load's value gates a copy in the loop. Each 8 threads
// copy one 128-byte line of a panel (four whole sectors of the key row), and the swizzle puts
// their 16-byte chunks in eight different bank groups.
#include "attention/parts/forward_block.cuh"
#include "tile/fast_divider.cuh"
#include "tile/swizzled_tile.cuh"
#include "tile/warpgroup_scope.cuh"

namespace flashjit {

/// Starts the copy of rows [0, rows_valid) of a (Rows, Cols) swizzled tile from `row_at(r)`
/// (a row's first element), zero-filling the rest; `Threads` threads, of which this is `thread`.
/// `row_at` is called for valid rows only.
template <int Threads, typename T, int Rows, int Cols, class RowAt>
FJ_DEVICE void load_swizzled_rows_async(swizzled_tile<T, Rows, Cols> dst, int rows_valid,
                                        const RowAt& row_at, const T* zero_source, int thread) {
  constexpr int kChunksPerRow = Cols / 8;
  static_assert(Rows * kChunksPerRow % Threads == 0, "every thread copies as many chunks");
#pragma unroll 4
  for (int c0 = 0; c0 < Rows * kChunksPerRow; c0 += Threads) {
    const int c = c0 + thread;
    const int row = c / kChunksPerRow, col = c % kChunksPerRow * 8;
    const bool valid = row < rows_valid;
    cp_async_16(dst.at(row, col), valid ? row_at(row) + col : zero_source, valid);
  }
}

template <class Traits>
struct LatentBlocks {
  using T = typename Traits::Element;
  using Tile = swizzled_tile<T, Traits::kBlockN, Traits::kHeadDim>;
  static constexpr int kKeys = Traits::kBlockN;
  static constexpr bool kPaged = Traits::Layout::kPaged;
  static constexpr int kLoaders = WarpgroupScope::kThreads;  // one warpgroup copies the blocks

  const ForwardBlock<Traits>& block;
  HeadTensor k;
  SequenceIndex sequences;
  Tile slot0;           // slot s is s tiles further
  int* pages0;          // block n's page-table entries at pages0 + n % 2 · kKeys
  FastDivider page_of;  // position → page-table entry: the page size as a multiply
  const T* k_head;      // the latent head's rows in page 0
  int end;              // one past the CTA's last key block
  int thread;           // of the loading warpgroup

  FJ_DEVICE LatentBlocks(const ForwardBlock<Traits>& block_, const AttentionForwardParams& p,
                         Tile slot0_, int* pages0_, int end_, int thread_)
      : block(block_),
        k(p.k),
        sequences(p.sequences),
        slot0(slot0_),
        pages0(pages0_),
        page_of(kPaged ? p.sequences.page_size : 1),
        k_head(p.k.rows<const T>(0, block_.kv_head, 0)),
        end(end_),
        thread(thread_) {}

  /// Block n's slot.
  FJ_DEVICE Tile slot(int n) const { return {slot0.data + n % 2 * (Tile::kBytes / 2)}; }

  /// Starts block n's page-table entries, one a thread (the block's keys are consecutive
  /// positions: 64 entries at pages of one key, one or two at 64): in the caller's commit group.
  FJ_DEVICE void load_pages(int n) const {
    if constexpr (kPaged) {
      const int keys = min_int(kKeys, block.seqlen_k - n * kKeys);
      if (n >= end || keys <= 0) return;
      const int position = block.paged_position(n * kKeys);
      const int first = page_of.divide(position);
      if (thread > page_of.divide(position + keys - 1) - first) return;
      cp_async_4(pages0 + n % 2 * kKeys + thread,
                 sequences.page_table + block.page_table_row(sequences) + first + thread, true);
    }
  }

  /// Starts block n's key rows into its slot, zero past the sequence's keys (nothing past the
  /// CTA's blocks): in the caller's commit group. Its page indices must have landed.
  FJ_DEVICE void load_keys(int n) const {
    if (n >= end) return;
    const int key0 = n * kKeys;
    if constexpr (kPaged) {
      const int position = block.paged_position(key0);
      const int first = page_of.divide(position);
      const int o0 = page_of.remainder(position, first);  // key 0's place in its page
      const int* pages = pages0 + n % 2 * kKeys;
      const auto row_at = [&](int row) {
        const int in_pages = o0 + row;
        const int entry = page_of.divide(in_pages);
        const index_t page = load_shared(pages, entry);
        return k_head + page * k.batch_stride +
               index_t(page_of.remainder(in_pages, entry)) * k.row_stride;
      };
      load_swizzled_rows_async<kLoaders>(slot(n), block.seqlen_k - key0, row_at, k_head, thread);
    } else {
      const T* first = block.key_row(k, sequences, key0);
      const auto row_at = [&](int row) { return first + row * k.row_stride; };
      load_swizzled_rows_async<kLoaders>(slot(n), block.seqlen_k - key0, row_at, first, thread);
    }
  }
};

}  // namespace flashjit
