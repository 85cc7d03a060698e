#pragma once
// How the forward kernel finds a batch's sequences, as a compile-time choice: a dense batch
// costs no index arithmetic, and each inference feature adds only its own (DESIGN.md section
// 1's combiner makes the split exact; HOPPER-NOTES section 4 has the peers' conventions).

namespace flashjit {

/// The forward kernel's sequence layout (a template parameter of ForwardTraits).
template <bool Varlen, bool Paged, bool PackGqa, bool Split>
struct SequenceLayout {
  static_assert(!Paged || Varlen, "a paged cache has per-sequence key counts (Varlen)");
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
  /// None of the above: FlashAttention-2's dense (batch, seqlen, heads, head_dim) tensors.
  static constexpr bool kDense = !Varlen && !Paged && !PackGqa && !Split;
};

using DenseLayout = SequenceLayout<false, false, false, false>;

}  // namespace flashjit
