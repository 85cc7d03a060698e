#pragma once
// One inference forward case end to end (Runtime::forward with Sequences), for any backend:
// sequences of their own lengths, their queries dense or packed, their keys dense, packed or in
// a paged cache with shuffled pages; each sequence's random inputs, reference and bound are
// those of a one-sequence ForwardCase (attention_case), so the bar is the same: per sequence,
// O's relative L2 error at most twice that of plain attention in the input dtype, LSE within
// 1e-4, nothing left unwritten.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attention/check/attention_reference.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::testing {

/// Where a case's keys and values live.
enum class KeyStorage {
  /// [batch, longest, heads_kv, head_dim], each sequence's count in seqlens_k (no index array
  /// when every sequence has the same)
  dense,
  packed,  ///< [total_k, heads_kv, head_dim] with cu_seqlens_k
  paged,   ///< pages of page_size keys in a shuffled order, with a page table and seqlens_k
};

struct InferenceCase {
  std::vector<std::int64_t> seqlens_q;  ///< per sequence (all equal unless packed_q)
  std::vector<std::int64_t> seqlens_k;  ///< per sequence
  std::int64_t heads_q = 4;
  std::int64_t heads_kv = 1;
  std::int64_t head_dim = 64;
  std::int64_t head_dim_v = 0;  ///< Attention::head_dim_v (0: head_dim)
  bool causal = false;
  std::int64_t window_left = -1;  ///< Attention::window_left (-1: unbounded)
  double softcap = 0;             ///< Attention::softcap (0: off)
  bool packed_q = false;          ///< q and o packed with cu_seqlens_q
  KeyStorage keys = KeyStorage::dense;
  std::int64_t page_size = 16;
  int splits = 0;              ///< Sequences::splits
  bool deterministic = false;  ///< Attention::deterministic (the backward's dQ kernel)
  /// Packed tensors larger than their sequences: rows past the last sequence's, NaN, which no
  /// sequence's result may read (in packed k and v; in the backward's q and dout too).
  std::int64_t spare_rows = 0;
  /// Rows each sequence's span holds past the ones it uses, NaN (which no result may read):
  /// unused_q after its seqlens_q queries (Sequences::seqused_q), unused_k after its seqlens_k
  /// keys, packed or dense (Sequences::seqlens_k). Their rows of o, dq, dk and dv must come out
  /// 0 and of lse -inf. Empty: none. No append, no pages.
  std::vector<std::int64_t> unused_q = {};
  std::vector<std::int64_t> unused_k = {};
  /// Keys each sequence appends in the call (Sequences::k_new): the last `append` of its
  /// seqlens_k arrive as new keys and values, the others are in the cache already (whose rows
  /// for the new ones start as NaN). Dense or packed queries; a dense or paged cache, 16-bit or
  /// fp8 (whose new rows arrive as codes in its scale). 0: no append.
  std::int64_t append = 0;
  /// Rotary embedding of q and the new keys (needs append), RoPE's tables over seqlen_k
  /// positions; rotary_dim 0 rotates the whole head.
  bool rotary = false;
  bool rotary_interleaved = false;
  std::int64_t rotary_dim = 0;
  /// A dense or paged cache: each sequence's keys start this many rows into its cache row (its
  /// pages) (Sequences::cache_leftpad, NaN before them); empty: none.
  std::vector<std::int64_t> leftpad = {};
  /// A dense or paged cache: sequence b in cache row (page-table row) batch - b of batch + 1
  /// rows, row 0 spare (NaN; no pages) (Sequences::cache_batch_idx).
  bool cache_batch_idx = false;
  /// Score and mask modifiers (Attention::score_mod, mask_mod): the text the kernel compiles,
  /// and a host function of the same expression for the reference (b: the sequence's index,
  /// q_idx and kv_idx within it). Empty: none. The backward's reference also takes
  /// ∂score_mod/∂score (reference::Problem::score_mod_slope).
  std::string score_mod_text = {};
  std::function<double(double, std::int64_t, std::int64_t, std::int64_t, std::int64_t)> score_mod =
      {};
  std::function<double(double, std::int64_t, std::int64_t, std::int64_t, std::int64_t)>
      score_mod_slope = {};
  std::string mask_mod_text = {};
  std::function<bool(std::int64_t, std::int64_t, std::int64_t, std::int64_t)> mask_mod = {};
  /// Dropout (Attention::dropout_p, dropout_seed, dropout_offset; p 0: none), the reference's
  /// mask regenerated per sequence (check/dropout_mask.hpp).
  float dropout_p = 0.0f;
  std::uint64_t dropout_seed = 0;
  std::uint64_t dropout_offset = 0;
  DType dtype = DType::bf16;
  /// An fp8 e4m3 cache (Sequences::k_descale): each sequence's random keys and values are
  /// quantized with descale factors of `descale`'s shape (distinct values per head and
  /// sequence), and the reference takes the dequantized values, so the bound stays the
  /// dtype's: what is judged is the kernel, not the quantization.
  bool kv_e4m3 = false;
  /// V is K's first value_dim() columns in the same memory, as in MLA's latent cache: each
  /// value row is its key row's first columns, and v is passed as a view of k's storage (the
  /// forward then loads K's blocks once for both products). No append, no fp8 cache.
  bool values_in_keys = false;
  enum class Descale { per_tensor, per_head, per_sequence } descale = Descale::per_head;
  std::uint64_t seed = 1;

  /// "n3.q[1,4,0].k[33,...].hq8.hkv1.d64.bf16.paged16.causal.split4" for messages.
  std::string name() const;
  /// The library's descriptor: batch = sequences, the longest lengths (seqlen_k: the cache's
  /// capacity, which holds the left pads too).
  Attention attention() const;
  /// Sequence b's rows of q (its used queries and unused_q's) and of packed or dense k.
  std::int64_t query_span(std::size_t b) const {
    return seqlens_q[b] + (unused_q.empty() ? 0 : unused_q[b]);
  }
  std::int64_t key_span(std::size_t b) const {
    return seqlens_k[b] + (unused_k.empty() ? 0 : unused_k[b]);
  }
  /// Every sequence's query_span (key_span).
  std::vector<std::int64_t> query_spans() const;
  std::vector<std::int64_t> key_spans() const;
  /// Sequence b's left pad (0 without).
  std::int64_t pad(std::size_t b) const { return leftpad.empty() ? 0 : leftpad[b]; }
  /// Keys a dense cache row holds: the longest sequence with its pad.
  std::int64_t capacity() const;
  /// V's and O's head dim: head_dim_v, or head_dim when it is 0.
  std::int64_t value_dim() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  /// The cache's dtype: e4m3 with kv_e4m3, else dtype.
  DType kv_dtype() const { return kv_e4m3 ? DType::e4m3 : dtype; }
  /// An fp8 cache's descale factor of sequence b's key (`value`: value) head h, as the case's
  /// descale shape spreads them.
  float descale_of(bool value, std::int64_t b, std::int64_t h) const;
};

/// A case of `sequences` random lengths: queries 0 to max_q (packed), keys 0 to max_k; the
/// first sequence has 1 query and 1 key where there are two or more, so that 0 and 1 both
/// occur once there are three.
InferenceCase random_lengths_case(int sequences, std::int64_t max_q, std::int64_t max_k,
                                  std::uint64_t seed);

/// Decoding as the counters tests measure it: `batch` sequences of one query over `context`
/// keys each, 32 query heads over 4 key/value heads (GQA 8:1), head dim 128, a paged cache of
/// pages of 16 keys.
InferenceCase paged_decode_case(int batch, std::int64_t context);

struct InferenceVerdict {
  bool ok = false;
  double worst_ratio = 0;     ///< the largest error / bound over the sequences
  std::string first_failure;  ///< which sequence, which check, the numbers
  std::vector<double> out;    ///< O as written (widened), to compare runs
  std::string describe() const;
};

/// Runs `c` on `runtime` and judges every sequence against its reference; with an append, also
/// the cache it leaves: the new keys (rotated) within one unit in the last place of the float64
/// rotation rounded to the dtype, the new values exactly, every other row unchanged.
InferenceVerdict run_inference_case(Runtime& runtime, const InferenceCase& c);

/// The backward of a variable-length batch: the runtime's inference forward (for O and LSE),
/// then Runtime::backward with the same sequences into poisoned dQ, dK, dV, each sequence's
/// gradients judged against its own float64 reference (reference::backward) with a one-
/// sequence BackwardCase's bound: twice the plain backward's relative L2 error in the input
/// dtype. Keys packed or dense (dense ones of one span), no pages, no splits; the rows past the
/// used ones (unused_q, unused_k) must come out 0. `out` holds dQ, dK and dV as written, one after
/// the other.
InferenceVerdict run_inference_backward_case(Runtime& runtime, const InferenceCase& c);

/// Sequence b's own problem (batch 1, its lengths, the case's heads, head dim and mask): the
/// reference each sequence is judged against.
reference::Problem sequence_problem(const InferenceCase& c, std::size_t b);

/// cu_seqlens of `lengths`: [0, l0, l0 + l1, ...] in int32.
std::vector<std::int32_t> sequence_offsets(const std::vector<std::int64_t>& lengths);
/// The longest of `lengths` (0 for none).
std::int64_t longest_length(const std::vector<std::int64_t>& lengths);

}  // namespace flashjit::testing
