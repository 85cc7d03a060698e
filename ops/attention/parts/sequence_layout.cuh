#pragma once
// How the forward kernel finds a batch's sequences, as a compile-time choice: a dense batch
// costs no index arithmetic, and each inference feature adds only its own (the combiner of
// docs/design.md makes the split exact; docs/inference.md notes where the peers' differ).

namespace flashjit {

/// The forward kernel's sequence layout (a template parameter of ForwardTraits).
template <bool Varlen, bool Paged, bool PackGqa, bool Split, bool KvE4m3 = false>
struct SequenceLayout {
  static_assert(!Paged || Varlen, "a paged cache has per-sequence key counts (Varlen)");
  static_assert(!KvE4m3 || Varlen, "an fp8 cache comes with per-sequence key counts (Varlen)");
  /// Per-sequence lengths and offsets from the SequenceIndex arrays (packed tensors).
  static constexpr bool kVarlen = Varlen;
  /// K and V are pages found through the page table.
  static constexpr bool kPaged = Paged;
  /// The query heads that share a key/value head are rows of one tile (row p is query p /
  /// heads_per_kv, head p % heads_per_kv of the group), so decoding's few queries fill the
  /// tensor cores' rows and each K/V block is read once for the whole group.
  static constexpr bool kPackGqa = PackGqa;
  /// The key blocks are split across CTAs, each writing an fp32 partial (SplitOutputs).
  static constexpr bool kSplit = Split;
  /// K and V are an fp8 e4m3 cache: their blocks land as bytes and are converted to the
  /// query's 16-bit type in shared memory (tile/e4m3.cuh); the scores and the output take the
  /// cache's descale factors in fp32.
  static constexpr bool kKvE4m3 = KvE4m3;
  /// None of the above: FlashAttention-2's dense (batch, seqlen, heads, head_dim) tensors.
  static constexpr bool kDense = !Varlen && !Paged && !PackGqa && !Split && !KvE4m3;
};

using DenseLayout = SequenceLayout<false, false, false, false>;

}  // namespace flashjit
