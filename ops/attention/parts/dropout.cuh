#pragma once
// Dropout on the attention probabilities (Attention::dropout_p), FlashAttention-2's contract:
// each probability P_ij is kept with probability 1 − p and scaled by 1 / (1 − p), or zeroed;
// the softmax's sum and the LSE are those of the undropped P. Which elements are kept is a
// pure function of (seed, offset, b, h, i, j), Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011), so the backward regenerates the forward's mask
// without storing it and a rerun with the same seed and offset is bit-identical. The host's
// float64 reference evaluates the same function (dropout_keeps below).
//
// One Philox call gives four 32-bit words for a 2 × 2 block of (query, key) pairs: counter
// (j / 2, i / 2, b · heads_q + h, offset's low word), key (seed's low word, seed's high word
// xor offset's high word), word 2·(i % 2) + j % 2. The forward's tiles hold two adjacent keys of
// a query per lane, the backward's transposed tiles two adjacent queries of a key: both use two
// of the four words. Element kept iff its word ≥ threshold = ⌊p · 2³²⌋. b, h, i, j are those of
// the modifiers: the sequence, the query head, and positions within the sequence.
#include "tile/platform.cuh"

namespace flashjit {

/// The call's dropout, as the kernels read it (threshold 0: none).
struct DropoutParams {
  unsigned threshold;  // ⌊p · 2³²⌋: a word below it drops its element
  float scale;         // 1 / (1 − p), applied to the kept elements
  unsigned seed[2];    // low, high word
  unsigned offset[2];  // low, high word
};

/// Philox4x32-10 of `counter` under `key`, in place.
FJ_DEVICE void philox4x32_10(unsigned (&counter)[4], unsigned key0, unsigned key1) {
  constexpr unsigned kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr unsigned kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {  // a constant trip count: unrolled (no pragma: the
                                              // host library includes this file too)
    const unsigned long long product0 = static_cast<unsigned long long>(kMul0) * counter[0];
    const unsigned long long product1 = static_cast<unsigned long long>(kMul1) * counter[2];
    const unsigned hi0 = static_cast<unsigned>(product0 >> 32),
                   lo0 = static_cast<unsigned>(product0);
    const unsigned hi1 = static_cast<unsigned>(product1 >> 32),
                   lo1 = static_cast<unsigned>(product1);
    counter[0] = hi1 ^ counter[1] ^ key0;
    counter[1] = lo1;
    counter[2] = hi0 ^ counter[3] ^ key1;
    counter[3] = lo0;
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
}

/// The four words of the 2 × 2 block holding (i, j) of query head `batch_head` (b · heads_q + h).
struct DropoutWords {
  unsigned word[4];

  FJ_DEVICE DropoutWords(const DropoutParams& d, int batch_head, int i, int j)
      : word{static_cast<unsigned>(j) >> 1, static_cast<unsigned>(i) >> 1,
             static_cast<unsigned>(batch_head), d.offset[0]} {
    philox4x32_10(word, d.seed[0], d.seed[1] ^ d.offset[1]);
  }
  /// Whether (i, j) of this block is kept.
  FJ_DEVICE bool keeps(const DropoutParams& d, int i, int j) const {
    return word[(i & 1) * 2 + (j & 1)] >= d.threshold;
  }
};

/// Whether element (i, j) of query head `batch_head` is kept: one Philox call, for the host's
/// reference and for tests.
FJ_DEVICE bool dropout_keeps(const DropoutParams& d, int batch_head, int i, int j) {
  return DropoutWords(d, batch_head, i, j).keeps(d, i, j);
}

}  // namespace flashjit
