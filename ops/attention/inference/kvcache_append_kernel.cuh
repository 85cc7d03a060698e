#pragma once
// Appending new keys and values to a KV cache before the attention that reads them
// (FlashAttention's flash_attn_with_kvcache with k and v): each new key row, rotated when the call
// asks for rotary embedding, and each new value row are written at the sequence's next cache
// positions, and the queries are rotated at their own positions into a workspace the attention
// reads. One block per (row, sequence); its threads take (head, dim pair) items. The rotation is
// x' = x·cos − y·sin, y' = y·cos + x·sin in fp32, rounded once to the element type (what the
// kernel that reads the cache would have seen had the caller rotated it).
#include "attention/inference/kvcache_append_params.cuh"
#include "attention/parts/sequence_span.cuh"
#include "tile/memory.cuh"
#include "tile/semaphore.cuh"

namespace flashjit {

/// Element_: q's type; Cache_: the cache's (and k_new's, v_new's): Element_, or e4m3_t for an
/// fp8 cache, whose new rows arrive as codes in the cache's scale (FlashAttention 3's rule) and
/// are copied, or rotated in fp32 and rounded back to e4m3 (a rotation commutes with the
/// per-head descale factor, so the codes rotate as the values do).
template <typename Element_, RotaryKind Rotary_, typename Cache_ = Element_>
struct KVCacheAppendConfig {
  using Element = Element_;
  using CacheElement = Cache_;
  static constexpr RotaryKind kRotary = Rotary_;
  static constexpr int kThreads = kKVCacheAppendThreads;
};

/// Key `key`'s row of head `head` of sequence `batch` in the cache tensor `t` (k or v).
template <typename T>
FJ_DEVICE T* cache_row(const CacheRows& cache, const HeadTensor& t, int batch, int head, int key) {
  const int row = cache.kv_batch_idx ? load_global_index(cache.kv_batch_idx, batch) : batch;
  if (cache.page_table == nullptr) return t.rows<T>(row, head, key);
  const int page = load_global_index(
      cache.page_table, index_t(row) * cache.page_table_stride + key / cache.page_size);
  return t.rows<T>(page, head, key % cache.page_size);
}

/// The two dims of pair `pair` of a head: rotated pairs follow the rotary layout, the rest
/// (dims rotary_dim and up) are neighbours.
struct DimPair {
  int first, second;
  bool rotated;
};

template <RotaryKind Kind>
FJ_DEVICE DimPair dim_pair(int pair, int rotary_dim) {
  const int half = rotary_dim / 2;
  if (Kind == RotaryKind::half && pair < half) return {pair, pair + half, true};
  return {2 * pair, 2 * pair + 1, Kind != RotaryKind::none && pair < half};
}

/// Copies one head's row from `src` to `dst`, rotating its rotated pairs at `position`;
/// the calling thread takes pairs item, item + step, ...
template <class Config, typename T>
FJ_DEVICE void copy_row_pairs(const T* src, T* dst, const RotaryTables& rotary, int position,
                              int head_dim, int item, int step) {
  for (int pair = item; pair < head_dim / 2; pair += step) {
    const DimPair dims = dim_pair<Config::kRotary>(pair, rotary.rotary_dim);
    float x = load_global(src, dims.first);
    float y = load_global(src, dims.second);
    if (dims.rotated) {
      const index_t at = index_t(position) * rotary.stride + pair;
      const float cos = load_global(rotary.cos, at), sin = load_global(rotary.sin, at);
      const float rotated_x = x * cos - y * sin;
      y = y * cos + x * sin;
      x = rotated_x;
    }
    store_global(dst, dims.first, x);
    store_global(dst, dims.second, y);
  }
}

/// The (head, dim pair) items of `heads` rows one thread takes: kThreads / pairs heads at a
/// time, thread t on pair t % pairs of head t / pairs (threads past a whole head idle).
template <class Config>
struct HeadItems {
  int first_head, head_step, pair;
  bool active;
  FJ_DEVICE HeadItems(int thread, int pairs)
      : first_head(thread / pairs),
        head_step(Config::kThreads / pairs),
        pair(thread % pairs),
        active(thread < Config::kThreads / pairs * pairs) {}
};

/// Grid (max(seqlen_new, seqlen_q with rotary), batch), Config::kThreads threads; head_dim at
/// most 2 · kThreads.
template <class Config>
FJ_GLOBAL void __launch_bounds__(Config::kThreads) kvcache_append_kernel(KVCacheAppendParams p) {
  using T = typename Config::Element;
  using C = typename Config::CacheElement;
  using PlainCopy = KVCacheAppendConfig<T, RotaryKind::none, C>;  // values are not rotated
  const int row = blockIdx.x;
  const int batch = blockIdx.y;
  // Launched to overlap the kernel before it; the attention kernel after it may start as soon
  // as every block of this one has (it waits for this grid's end before it reads the cache).
  wait_for_previous_grid();
  allow_next_grid();
  const int cached = load_global_index(p.cache_seqlens, batch);  // keys before this call
  const int pairs = p.head_dim / 2;
  const HeadItems<Config> items(threadIdx.x, pairs);
  if (row == 0 && threadIdx.x == 0) {
    store_global_raw(p.seqlens_k_out + batch, cached + p.seqlen_new);
  }
  if (!items.active) return;
  if (row < p.seqlen_new) {
    const int position = cached + row;
    for (int head = items.first_head; head < p.heads_kv; head += items.head_step) {
      copy_row_pairs<Config>(p.k_new.rows<const C>(batch, head, row),
                             cache_row<C>(p.cache, p.cache.k, batch, head, position), p.rotary,
                             position, p.head_dim, items.pair, pairs);
      // (A value head dim below head_dim leaves the threads of the pairs past it idle here.)
      copy_row_pairs<PlainCopy>(p.v_new.rows<const C>(batch, head, row),
                                cache_row<C>(p.cache, p.cache.v, batch, head, position), p.rotary,
                                position, p.head_dim_v, items.pair, pairs);
    }
  }
  if (p.q_rotated.data == nullptr) return;
  // The sequence's q rows: its own span of packed q (batch 0), or seqlen_q of dense q.
  const bool packed = p.cu_seqlens_q != nullptr;
  const SequenceSpan queries =
      packed ? sequence_span(p.cu_seqlens_q, batch) : SequenceSpan{0, p.seqlen_q};
  if (row >= queries.length) return;
  const int q_batch = packed ? 0 : batch, q_row = int(queries.start) + row;
  const int position = cached + (p.q_positions_advance ? row : 0);
  for (int head = items.first_head; head < p.heads_q; head += items.head_step) {
    copy_row_pairs<Config>(p.q.rows<const T>(q_batch, head, q_row),
                           p.q_rotated.rows<T>(q_batch, head, q_row), p.rotary, position,
                           p.head_dim, items.pair, pairs);
  }
}

}  // namespace flashjit
