#pragma once
// One warp's stream of key/value chunks in the decode kernel: a ring of kStages slots in the
// warp's own shared memory, filled by cp.async one chunk per commit group, kStages − 1 chunks
// ahead of the one the warp computes on. A paged cache's page indices come the same way, in the
// group of the chunk kStages − 1 before theirs, so when a chunk's copies are issued its indices
// have landed in shared memory: no global load's value gates a copy in the loop, and the only
// waits are for data (docs/inference.md, "The decode kernel"). The warp needs no barrier but its
// own: nothing in a ring is another warp's. An fp8 cache's chunks land as bytes, and each lane
// converts the chunks it copied into the warp's one 16-bit K and V tile the products read.
#include "attention/parts/forward_block.cuh"
#include "tile/e4m3.cuh"
#include "tile/fast_divider.cuh"
#include "tile/shared_tile.cuh"

namespace flashjit {

template <class Traits>
struct DecodeRing {
  using T = typename Traits::Element;
  using Tile = smem_tile<T, Traits::kKeys, Traits::kHeadDimPadded>;
  static constexpr int kStages = Traits::kStages;
  static constexpr int kKeys = Traits::kKeys;
  static constexpr bool kPaged = Traits::Layout::kPaged;
  static constexpr bool kKvE4m3 = Traits::Layout::kKvE4m3;
  /// What a slot holds: the cache's rows as they are (16-bit, or fp8 bytes to convert).
  using Slot = select_type_t<kKvE4m3, e4m3_tile<kKeys, Traits::kHeadDimPadded>, Tile>;
  using KeyElement = select_type_t<kKvE4m3, unsigned char, T>;
  /// Bytes of one warp's ring: kStages K slots, kStages V slots, kStages chunks' page indices
  /// (at most kKeys each), and with an fp8 cache the 16-bit K and V tiles.
  static constexpr int kBytes =
      attention_decode_space::ring_bytes(Traits::kHeadDim, kKeys, kStages, kKvE4m3);

  const ForwardBlock<Traits>& block;
  HeadTensor k, v;
  SequenceIndex sequences;
  int value_cols;            // V's head dim: its columns past it load as zeros
  int first_chunk;           // the warp's chunk i is first_chunk + i · kWarps (in kKeys keys)
  int chunks;                // how many chunks the warp has
  Slot k0, v0;               // slot 0 of the K and V rings; slot s is s slots further
  int* pages0;               // slot 0 of the page indices (kKeys per slot)
  FastDivider page_of;       // position → page-table entry: the page size as a multiply
  const KeyElement* k_head;  // the key/value head's rows in page 0 (or batch 0)
  const KeyElement* v_head;
  Tile k16, v16;  // an fp8 cache's chunk, converted (else unused)
  int lane;

  /// The ring of warp `warp` in `base` (the warps' rings, one after another), over the CTA's
  /// chunks [range.begin, range.end), of which the warp takes every kWarps-th from its own.
  FJ_DEVICE DecodeRing(unsigned char* base, const ForwardBlock<Traits>& block_,
                       const AttentionForwardParams& p, BlockRange range, int warp)
      : block(block_),
        k(p.k),
        v(p.v),
        sequences(p.sequences),
        value_cols(p.head_dim_v),
        first_chunk(range.begin + warp),
        chunks(max_int(0, ceil_div(range.end - range.begin - warp, Traits::kWarps))),
        page_of(kPaged ? p.sequences.page_size : 1),
        k_head(p.k.rows<const KeyElement>(0, block_.kv_head, 0)),
        v_head(p.v.rows<const KeyElement>(0, block_.kv_head, 0)),
        lane(threadIdx.x % kWarpSize) {
    base += warp * kBytes;
    k0 = {reinterpret_cast<decltype(Slot::data)>(base)};
    v0 = {reinterpret_cast<decltype(Slot::data)>(base + kStages * Slot::kBytes)};
    pages0 = reinterpret_cast<int*>(base + 2 * kStages * Slot::kBytes);
    unsigned char* converted = base + 2 * kStages * Slot::kBytes + kStages * kKeys * 4;
    k16 = {reinterpret_cast<T*>(converted)};
    v16 = {reinterpret_cast<T*>(converted + Tile::kBytes)};
  }

  /// The first key of the warp's chunk i.
  FJ_DEVICE int key0(int i) const { return (first_chunk + i * Traits::kWarps) * kKeys; }

  /// Starts the page indices of the first kStages − 1 chunks (in the caller's commit group,
  /// which it waits for before start()).
  FJ_DEVICE void load_first_pages() {
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) load_pages(i);
  }

  /// Starts the first kStages − 1 chunks, a commit group each. Chunk i's issue writes the page
  /// indices of chunk i + kStages − 1 over chunk i − 1's, which the lanes read in the issue
  /// before: a warp barrier between them, as await's in the loop.
  FJ_DEVICE void start() {
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      if (i > 0) __syncwarp();
      issue(i);
    }
  }

  /// Waits until chunk i is in the warp's shared memory, then starts chunk i + kStages − 1 in
  /// the slot chunk i − 1 left (an fp8 cache's chunk i is converted); returns chunk i's slot.
  FJ_DEVICE int await(int i) {
    cp_async_wait<kStages - 2>();  // chunk i, and with it the indices of chunk i + kStages − 1
    __syncwarp();                  // also: every lane is done with chunk i − 1's slot
    issue(i + kStages - 1);
    const int slot = i % kStages;
    if constexpr (kKvE4m3) {  // each lane its own chunks (copied alike), then for the warp
      convert_e4m3_tile<kWarpSize>(slot_at(k0, slot), k16, lane);
      convert_e4m3_tile<kWarpSize>(slot_at(v0, slot), v16, lane);
      __syncwarp();
    }
    return slot;
  }

  /// Chunk i's K and V tiles as the products read them (the converted ones for fp8).
  FJ_DEVICE Tile keys(int slot) const {
    if constexpr (kKvE4m3) {
      return k16;
    } else {
      return slot_at(k0, slot);
    }
  }
  FJ_DEVICE Tile values(int slot) const {
    if constexpr (kKvE4m3) {
      return v16;
    } else {
      return slot_at(v0, slot);
    }
  }

 private:
  FJ_DEVICE int* pages(int slot) const { return pages0 + slot * kKeys; }
  FJ_DEVICE static Slot slot_at(Slot first, int slot) {
    return {first.data + slot * (Slot::kBytes / int(sizeof(*first.data)))};
  }

  /// Chunk i's copies and the page indices of chunk i + kStages − 1, as one commit group (an
  /// empty one past the warp's chunks, so the group count stays one per chunk).
  FJ_DEVICE void issue(int i) {
    load_chunk(i);
    load_pages(i + kStages - 1);
    cp_async_commit();
  }

  /// Where chunk i's key rows are. Paged: row r at offset o0 + r past the start of the page of
  /// table entry first_entry, and k and v the key/value head's rows in page 0; dense: k and v
  /// the chunk's first rows.
  struct ChunkStart {
    int first_entry;
    int o0;
    const KeyElement* k;
    const KeyElement* v;
  };
  FJ_DEVICE ChunkStart chunk_start(int i) const {
    if constexpr (kPaged) {
      const int position = block.paged_position(key0(i));
      const int entry = page_of.divide(position);
      return {entry, page_of.remainder(position, entry), k_head, v_head};
    } else {
      return {0, 0, block.template key_row<KeyElement>(k, sequences, key0(i)),
              block.template key_row<KeyElement>(v, sequences, key0(i))};
    }
  }

  /// The page-table entries chunk i's keys lie in, one a lane (lane l the first entry + l): a
  /// chunk's keys are consecutive positions, so these are the only ones it reads (16 at pages of
  /// one key, one or two at 16 and up); none past the sequence's keys.
  FJ_DEVICE void load_pages(int i) {
    if constexpr (kPaged) {
      if (i >= chunks) return;
      const int keys = min_int(kKeys, block.seqlen_k - key0(i));
      if (keys <= 0) return;
      const ChunkStart at = chunk_start(i);
      if (lane > page_of.divide(at.o0 + keys - 1)) return;
      cp_async_4(pages(i % kStages) + lane,
                 sequences.page_table + block.page_table_row(sequences) + at.first_entry + lane,
                 true);
    }
  }

  /// Key row `row` of chunk i in k and v (rows past the sequence's keys are not asked for).
  struct KeyRows {
    const KeyElement* k;
    const KeyElement* v;
  };
  FJ_DEVICE KeyRows key_rows(int slot, const ChunkStart& at, int row) const {
    if constexpr (kPaged) {
      const int in_pages = at.o0 + row;  // past the start of the chunk's first page
      const int entry = page_of.divide(in_pages);
      const index_t page = load_shared(pages(slot), entry);
      const index_t offset = page_of.remainder(in_pages, entry);
      return {at.k + page * k.batch_stride + offset * k.row_stride,
              at.v + page * v.batch_stride + offset * v.row_stride};
    } else {
      return {at.k + row * k.row_stride, at.v + row * v.row_stride};
    }
  }

  /// Chunk i's K and V rows into its slot, zero past the sequence's keys and the head dims.
  /// 16-byte chunk c of the slot is lane c % 32's, as convert_e4m3_tile deals them. Unrolled,
  /// with the page arithmetic a multiply and a shift (FastDivider), so a lane's rows' shared
  /// loads of their page indices overlap instead of each waiting behind a division.
  FJ_DEVICE void load_chunk(int i) {
    if (i >= chunks) return;
    constexpr int kElements = 16 / int(sizeof(KeyElement));  // a 16-byte chunk's
    constexpr int kChunksPerRow = Traits::kHeadDimPadded / kElements;
    constexpr int kCopies = kKeys * kChunksPerRow;  // of K's chunk, and as many of V's
    const int slot = i % kStages;
    const Slot k_slot = slot_at(k0, slot), v_slot = slot_at(v0, slot);
    const int rows_valid = block.seqlen_k - key0(i);
    const auto* zero_source = static_cast<const KeyElement*>(k.data);
    const ChunkStart at = chunk_start(i);
#pragma unroll
    for (int c0 = 0; c0 < kCopies; c0 += kWarpSize) {
      const int c = c0 + lane;
      if (kCopies % kWarpSize != 0 && c >= kCopies) break;
      const int row = c / kChunksPerRow;
      const int col = c % kChunksPerRow * kElements;
      const bool row_valid = row < rows_valid;
      KeyRows rows{zero_source, zero_source};
      if (row_valid) rows = key_rows(slot, at, row);
      const bool k_valid = row_valid && col < Traits::kHeadDim;
      const bool v_valid = row_valid && col < value_cols;
      cp_async_16(k_slot.at(row, col), k_valid ? rows.k + col : zero_source, k_valid);
      cp_async_16(v_slot.at(row, col), v_valid ? rows.v + col : zero_source, v_valid);
    }
  }
};

}  // namespace flashjit
