#pragma once
// The KV-cache append's arguments (attention/inference/kvcache_append_kernel.cuh), shared by the
// host, which fills them, and the kernel, which takes them by value.
#include "attention/parts/head_tensor.cuh"

namespace flashjit {

/// Threads a block of the append kernel (one block per (row, sequence)).
constexpr int kKVCacheAppendThreads = 128;

/// How q and the new keys are rotated (RoPE) on their way in.
enum class RotaryKind : int {
  none = 0,
  half = 1,         // dims d and d + rotary_dim / 2 form a pair (GPT-NeoX, Llama)
  interleaved = 2,  // dims 2i and 2i + 1 form a pair (GPT-J)
};

/// Where the cache's key j of sequence b is, with r = kv_batch_idx[b] (or b): row r of a dense
/// [rows, capacity, heads_kv, head_dim] tensor (page_table nullptr), or row j % page_size of
/// page page_table[r · stride + j / page_size] of [pages, page_size, heads_kv, head_dim].
struct CacheRows {
  HeadTensor k, v;  // written
  const int* page_table;
  index_t page_table_stride;
  int page_size;
  const int* kv_batch_idx;  // [batch]: sequence b's cache (or page table) row; nullptr: row b
};

/// The rotary tables: cos and sin of position p and pair i at [p · stride + i], fp32,
/// rotary_dim / 2 pairs a position.
struct RotaryTables {
  const float* cos;
  const float* sin;
  index_t stride;
  int rotary_dim;  // even, at most head_dim; 0 without rotary
};

/// Arguments of flashjit::kvcache_append_kernel. Sequence b's new key i goes to cache position
/// cache_seqlens[b] + i; seqlens_k_out[b] = cache_seqlens[b] + seqlen_new, the count the
/// attention that follows reads. With rotary, q row i of sequence b (at position
/// cache_seqlens[b] + i when q_positions_advance, else cache_seqlens[b]) is written rotated to
/// q_rotated.
struct KVCacheAppendParams {
  HeadTensor k_new;      // (batch, seqlen_new, heads_kv, head_dim)
  HeadTensor v_new;      // (batch, seqlen_new, heads_kv, head_dim_v)
  HeadTensor q;          // (batch, seqlen_q, heads_q, head_dim), or packed (1, total_q, ...)
  HeadTensor q_rotated;  // like q, written; data nullptr: no rotation of q
  // [batch + 1]: packed q, sequence b's rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of batch
  // 0; nullptr: dense q, seqlen_q rows a sequence.
  const int* cu_seqlens_q;
  CacheRows cache;
  RotaryTables rotary;
  const int* cache_seqlens;  // (batch)
  int* seqlens_k_out;        // (batch), written
  int seqlen_new;
  int seqlen_q;
  int heads_kv;
  int heads_q;
  int head_dim;
  int head_dim_v;            // V's, at most head_dim (MLA's 128 of 192)
  bool q_positions_advance;  // causal or windowed: query i sits at cache_seqlens[b] + i
};

}  // namespace flashjit
