#pragma once
// The forward kernel's run-time arguments, one struct shared by the host (which fills it) and
// the kernel (which takes it by value). Everything that varies per call and not per
// specialization lives here; what the kernel needs as a compile-time constant is in the config.
#include "attention/parts/block_mask_params.cuh"
#include "attention/parts/dropout.cuh"
#include "attention/parts/head_tensor.cuh"

namespace flashjit {

/// The fp32 factor of sequence b's key/value head h: data[b · batch_stride + h · head_stride],
/// strides 0 where one factor covers every sequence (per tensor) or every head; nullptr: 1
/// (descale_at reads it).
struct CacheDescale {
  const float* data;
  index_t batch_stride;
  index_t head_stride;
};

/// Where the sequences of a batch are when they are not one dense [seqlen, heads, head_dim]
/// block each (variable lengths, a paged KV cache). The kernel reads these arrays only in the
/// specializations whose SequenceLayout asks for it (attention/parts/sequence_layout.cuh); nullptr
/// otherwise.
struct SequenceIndex {
  // [batch + 1], nondecreasing from 0: sequence b's queries are rows [cu[b], cu[b + 1]) of the
  // packed q and o (whose batch stride is then 0); nullptr: seqlen_q rows per sequence.
  const int* cu_seqlens_q;
  // [batch + 1]: likewise for packed k and v; nullptr: dense k and v, or paged.
  const int* cu_seqlens_k;
  // [batch]: sequence b's key count, read instead of cu_seqlens_k (a paged cache's lengths);
  // nullptr: from cu_seqlens_k, or seqlen_k.
  const int* seqlens_k;
  // [batch]: sequence b uses its first seqused_q[b] queries only (FlashAttention's seqused_q;
  // its length for the masks too); nullptr: all of them.
  const int* seqused_q;
  // [rows, page_table_stride]: key j of sequence b, at position p = leftpad_k[b] + j (or j),
  // is row p % page_size of page page_table[r · page_table_stride + p / page_size] of k and v,
  // r = kv_batch_idx[b] (or b); k and v are then [pages, page_size, heads_kv, head_dim] (their
  // batch stride is the page stride).
  const int* page_table;
  index_t page_table_stride;
  int page_size;
  // [batch]: sequence b's batch row of dense k and v, or row of the page table
  // (FlashAttention's cache_batch_idx); nullptr: row b.
  const int* kv_batch_idx;
  // [batch]: sequence b's keys start at this row of its dense k and v (position in its pages),
  // and seqlens_k[b] counts from the row's start (FlashAttention's cache_leftpad); nullptr:
  // from row 0.
  const int* leftpad_k;
  // An fp8 cache's descale factors (SequenceLayout::kKvE4m3): K's true values are its stored
  // ones times k_descale, V's times v_descale.
  CacheDescale k_descale;
  CacheDescale v_descale;
  // The fp8 forward's (q, k and v all e4m3; attention/fp8/): Q's true values are its codes
  // times q_descale, K's and V's as above.
  CacheDescale q_descale;
};

/// Split-KV: the keys of each query block are split into `splits` ranges, one CTA each, which
/// write fp32 partial results (normalized over their own keys) for merge_states to combine.
/// Token t is query row t of the flattened batch: b · seqlen_q + i, or cu_seqlens_q[b] + i.
struct SplitOutputs {
  float* o;                // (splits, tokens, heads_q, head_dim)
  float* lse;              // (splits, tokens, heads_q), natural log
  index_t o_split_stride;  // tokens · heads_q · head_dim
  index_t o_token_stride;  // heads_q · head_dim (the head stride is head_dim)
  index_t lse_split_stride;
  index_t lse_token_stride;  // heads_q (the head stride is 1)
  int splits;
  // [batch, grid.y, query blocks]: the count of a (sequence, head, query block)'s splits that
  // are done, zero before the launch and left zero by the last of them, which merges the
  // partials in the same launch (the decode kernel); nullptr: merge_states merges them after.
  int* arrivals;
};

/// Arguments of flashjit::attention_forward_kernel. Query row i of a sequence sees key j iff
///   j < seqlen_k  and  i + diagonal - window_left <= j <= i + diagonal + window_right
/// where diagonal = seqlen_k - seqlen_q aligns the mask to the bottom right (FlashAttention-2),
/// with the sequence's own lengths where they vary (`sequences`).
/// Causal is window_right = 0 with an unbounded left window; an unbounded side is kNoWindow.
struct AttentionForwardParams {
  static constexpr int kNoWindow = 1 << 30;

  HeadTensor q;  // (batch, seqlen_q, heads_q, head_dim)
  HeadTensor k;  // (batch, seqlen_k, heads_kv, head_dim)
  HeadTensor v;  // (batch, seqlen_k, heads_kv, head_dim_v)
  HeadTensor o;  // (batch, seqlen_q, heads_q, head_dim_v), written
  float* lse;    // (batch, heads_q, seqlen_q) natural-log LSE, written; nullptr: skipped.
                 // With cu_seqlens_q, (heads_q, total_q) and lse_batch_stride 0.
  index_t lse_batch_stride;
  index_t lse_head_stride;  // the row stride is 1

  int seqlen_q;      // per sequence; with cu_seqlens_q the longest (the grid covers it)
  int seqlen_k;      // per sequence; with per-sequence lengths the longest
  int head_dim;      // Q's and K's real head dim (the config's may be padded up to 16)
  int head_dim_v;    // V's and O's, at most head_dim: their columns past it are zero in the tiles
  int heads_per_kv;  // heads_q / heads_kv: query head h reads key/value head h / heads_per_kv
  int heads_q;       // query heads, and
  int batch;         // sequences: the persistent Hopper forward's tiles (the others use the grid)
  int window_left;   // keys visible left of the diagonal, kNoWindow for all
  int window_right;  // keys visible right of the diagonal, kNoWindow for all

  // Scores in the base-2 domain, folded on the host: without softcap s2 = (q·k) · score_scale
  // with score_scale = scale · log2(e); with softcap c, s2 = softcap_log2 · tanh((q·k) ·
  // score_scale) with score_scale = scale / c and softcap_log2 = c · log2(e).
  float score_scale;
  float softcap_log2;

  SequenceIndex sequences;   // variable lengths and pages (zero for a dense batch)
  SplitOutputs split;        // split-KV partials (zero without splits)
  BlockMaskView block_mask;  // the mask modifier's block mask (dense batches; zero without)
  CaptureTable captures;     // tensors the modifiers read (Attention::captures)
  DropoutParams dropout;     // read by the kernels whose Modifiers have kDropout
  // The persistent masked Hopper forward's tile counter (TileSchedule::kDynamic): zero at
  // launch, left zero by the launch; nullptr for the other kernels.
  int* tile_counter;
};

}  // namespace flashjit
