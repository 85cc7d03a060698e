#pragma once
// The consumer warpgroups of the warp-specialized Hopper forward (tma_forward_kernel.cuh):
// where a CTA works, the online softmax over the key blocks the producer's ring delivers, and
// O's way out. Two loops, as FlashAttention-3 has them:
//  - attend: per block, S = Q Kᵀ, the softmax, O += P V, each product waited for;
//  - attend_overlapped: per block, S = Q Kᵀ of this block and O += P V of the previous one
//    are issued together, and the softmax of this block runs while the P V product does; with
//    pingpong, two warpgroups take turns issuing their products (ProductTurns), so one's
//    softmax also runs under the other's products.
#include "attention/hopper/tma_forward_traits.cuh"
#include "attention/hopper/tma_tile_schedule.cuh"
#include "attention/parts/cache_descale.cuh"
#include "attention/parts/epilogue.cuh"
#include "attention/parts/forward_params.cuh"
#include "attention/parts/forward_softmax.cuh"
#include "attention/parts/head_tensor.cuh"
#include "attention/parts/mask.cuh"
#include "tile/warpgroup_scope.cuh"

namespace flashjit {

/// The warp-specialized forward's named barriers (bar.sync ids; 0 is __syncthreads'), every one
/// the kernel uses. Enumerators, not static data members: NVRTC would emit those as PTX globals.
struct TmaForwardBarrier {
  enum : int {
    /// 1 + g: warpgroup g's 128 threads alone (WarpgroupScope::sync): its rows of P or O are
    /// written. Three consumer warpgroups at most: ids 1 to 3.
    kWarpgroup = 1,
    /// 4 + g: warpgroup g's turn to issue its products (pingpong: both consumer warpgroups).
    kProductTurn = 4,
    /// The threads of a product turn: the two consumer warpgroups.
    kProductTurnThreads = 2 * WarpgroupScope::kThreads,
  };
};

/// Pingpong between two consumer warpgroups: each issues its products only on its turn and then
/// hands the turn over, so the products of one run under the other's softmax. Two named
/// barriers of 256 threads: warpgroup g waits on kProductTurn + g, the other arrives there.
/// Warpgroup 0 goes first; warpgroup 1 does not hand over after its last block, so every
/// arrival is waited for. Without pingpong (Enabled false) it does nothing.
template <bool Enabled>
struct ProductTurns {
  using Barrier = TmaForwardBarrier;
  int group;  // 0 or 1

  /// Before the first block: warpgroup 1 gives warpgroup 0 the first turn.
  FJ_DEVICE void start(const BlockRange& keys) const {
    if (Enabled && group == 1 && !keys.empty()) {
      named_barrier_arrive(Barrier::kProductTurn, Barrier::kProductTurnThreads);
    }
  }
  /// Waits for this warpgroup's turn.
  FJ_DEVICE void wait() const {
    if (Enabled) named_barrier_sync(Barrier::kProductTurn + group, Barrier::kProductTurnThreads);
  }
  /// Hands the turn to the other warpgroup, after the products of block `block` of `keys`.
  FJ_DEVICE void pass(const BlockRange& keys, int block) const {
    if (Enabled && !(group == 1 && block + 1 == keys.end)) {
      named_barrier_arrive(Barrier::kProductTurn + 1 - group, Barrier::kProductTurnThreads);
    }
  }
};

/// This warp's rows of P as the A operand of O += P V: in the 16-bit type, or with fp8 inputs
/// (Traits::kQkE4m3) rounded to e4m3, two codes an element (to_e4m3_operand).
template <class Traits, bool Fp8 = Traits::kQkE4m3>
struct ProbabilityRegisters {
  using type = operand_tile<typename Traits::Element, 16, Traits::kBlockN>;
};
template <class Traits>
struct ProbabilityRegisters<Traits, true> {
  using type = operand_tile<e4m3x2_t, 16, Traits::kBlockN / 2>;
};

/// The consumers' online softmax: with fp8 inputs P shifted into e4m3's range before it is
/// rounded (kE4m3ProbabilityShift).
template <class Traits>
using ProbabilitySoftmax = OnlineSoftmax<16, Traits::kQkE4m3 ? kE4m3ProbabilityShift : 0>;

/// P on its way to O += P V, where the config keeps it: this warp's rows in registers (the
/// RS form, FlashAttention-3's default from head dim 128), or the warpgroup's rows of a shared
/// tile (SS, kPShared), which frees registers for larger tiles at small head dims. With fp8
/// inputs, registers in e4m3 and V as Vᵀ (K-major, attention/fp8/fp8_tma_loads.cuh).
template <class Traits>
struct ProbabilityOperand {
  using T = typename Traits::Element;
  typename ProbabilityRegisters<Traits>::type registers;  // unused with kPShared

  /// Takes this block's P (the softmax's output in `s`). With kPShared every thread of the
  /// warpgroup stores its rows and waits for the others: the product reads all 64 rows.
  template <class Shared>
  FJ_DEVICE void set(const acc_tile<16, Traits::kBlockN>& s, const Shared& smem, int thread) {
    if constexpr (Traits::kQkE4m3) {
      registers = to_e4m3_operand(s);
    } else if constexpr (Traits::kPShared) {
      const WarpgroupScope scope{thread};
      store_fragments(s, smem.p, scope.warp_row0(), 0, scope.lane());
      fence_proxy_async();                        // generic writes, read by wgmma
      scope.sync(TmaForwardBarrier::kWarpgroup);  // the warpgroup's 64 rows are written
    } else {
      registers = to_operand<T>(s);
    }
  }

  /// Issues O += P V with V in ring slot `stage` (a wgmma group, not waited for).
  template <class Shared>
  FJ_DEVICE void multiply_async(acc_tile<16, Traits::kHeadDimPadded>& o, const Shared& smem,
                                int stage, int thread) const {
    if constexpr (Traits::kQkE4m3) {
      warpgroup_ab_transposed_async(o, registers, smem.v(stage));
    } else if constexpr (Traits::kPShared) {
      warpgroup_ab_async(o, smem.p, WarpgroupScope{thread}.row0(), smem.v(stage));
    } else {
      warpgroup_ab_async(o, registers, smem.v(stage));
    }
  }
};

/// A consumer thread's place in the CTA's block and the rules its scores follow, which both
/// consumer loops share.
template <class Traits>
struct ConsumerRows {
  int lane;
  int warp_row0;            // the warp's first row in the block
  int group_row0;           // its warpgroup's
  int first_row, last_row;  // the block's valid query rows
  KeyWindow<Traits::kMask> window;
  // The scores' scale: the call's, times an fp8 cache's k_descale (q·k = (q·k_stored)·k_descale)
  // or, with fp8 queries too, q_descale · k_descale.
  float score_scale;
  float scale;  // the softmax's exponent scale

  FJ_DEVICE ConsumerRows(const AttentionForwardParams& params, const TmaForwardBlock& at,
                         WarpgroupScope scope)
      : lane(scope.lane()),
        warp_row0(scope.warp_row0()),
        group_row0(scope.row0()),
        first_row(at.row0),
        last_row(at.row0 + at.rows - 1),
        window(at.window<Traits::kMask>(params)),
        score_scale(params.score_scale * input_descale(params, at)),
        scale(Traits::kScaled ? 1.0f : score_scale) {}

  /// The factor fp8 inputs' codes take to their values in q·k (1 for 16-bit ones).
  FJ_DEVICE static float input_descale(const AttentionForwardParams& params,
                                       const TmaForwardBlock& at) {
    const SequenceIndex& sequences = params.sequences;
    if constexpr (Traits::kQkE4m3) {
      return descale_at(sequences.q_descale, at.batch, at.kv_head) *
             descale_at(sequences.k_descale, at.batch, at.kv_head);
    } else if constexpr (Traits::kKvE4m3) {
      return descale_at(sequences.k_descale, at.batch, at.kv_head);
    }
    return 1.0f;
  }

  /// Softcap, the caller's modifiers, then −inf where the mask hides a key (blocks it hides
  /// nothing of are left).
  FJ_DEVICE void cap_and_mask(acc_tile<16, Traits::kBlockN>& s,
                              const AttentionForwardParams& params, const TmaForwardBlock& at,
                              int key0) const {
    using Modifiers = typename Traits::Modifiers;
    cap_scores<Traits::kSoftcap>(s, params.softcap_log2, score_scale);
    if constexpr (Modifiers::kScore || Modifiers::kMask) {
      const float to_natural = (Traits::kSoftcap ? 1.0f : score_scale) * kLn2;
      modify_scores<Modifiers>(s, at, warp_row0, key0, to_natural, true, params.captures, lane);
    }
    if (!window.block_fully_visible(first_row, last_row, key0, Traits::kBlockN)) {
      mask_scores_by_row(window, s, first_row + warp_row0, key0, lane);
    }
  }
};

/// An fp8 cache or fp8 inputs: O = (P V_stored) · v_descale, in fp32 before O is rounded
/// (nothing otherwise).
template <class Traits>
FJ_DEVICE void descale_values(acc_tile<16, Traits::kHeadDimPadded>& o,
                              const AttentionForwardParams& params, const TmaForwardBlock& at) {
  if constexpr (Traits::kKvE4m3 || Traits::kQkE4m3) {
    const float factor = descale_at(params.sequences.v_descale, at.batch, at.kv_head);
    for_each_in_row(o, [&](int, float& x) { x *= factor; });
  }
}

/// Packed sequences: the warpgroup's rows of O, staged in Q's tile, to global memory by its 128
/// threads, 16 bytes at a time, rows past the sequence's end and columns past the head dim left
/// alone (a TMA box would write them: the next sequence's rows).
template <class Traits>
FJ_DEVICE void store_packed_rows(const TmaForwardShared<Traits>& smem,
                                 const AttentionForwardParams& params, const TmaForwardBlock& at,
                                 int group_row0, int worker) {
  using T = typename Traits::Element;
  constexpr int kChunksPerRow = Traits::kHeadDimPadded / kChunkElements;
  const int rows = min_int(64, at.rows - group_row0);
#pragma unroll 1
  for (int chunk = worker; chunk < rows * kChunksPerRow; chunk += 128) {
    const int row = group_row0 + chunk / kChunksPerRow;
    const int col = chunk % kChunksPerRow * kChunkElements;
    if (col >= params.head_dim_v) continue;
    const Chunk16 value = load_shared(reinterpret_cast<const Chunk16*>(smem.q.at(row, col)), 0);
    T* dst = params.o.rows<T>(at.tensor_batch, at.head, at.q_row0 + row) + col;
    store_global_raw(reinterpret_cast<Chunk16*>(dst), value);
  }
}

/// The end of a consumer warpgroup's epilogue once each warp has written its rows of O into
/// `tile` (the warpgroup's 64 rows from `tile_row0`): one TMA store of them by the warpgroup's
/// first thread (rows past seqlen_q are not written), which waits until the store has read the
/// tile, so the tile may be written again (the next tile's Q, the next O) or the CTA exit; the
/// global writes need no wait (FlashAttention-3's epilogue).
template <class Tile>
FJ_DEVICE void store_warpgroup_rows(const Tile& tile, int tile_row0, const AttentionTmaMaps& maps,
                                    const TmaForwardBlock& at, const WarpgroupScope& scope) {
  fence_proxy_async();                        // generic writes, read by the async proxy
  scope.sync(TmaForwardBarrier::kWarpgroup);  // the warpgroup's 64 rows are written
  if (!scope.leader() || scope.row0() >= at.rows) return;
  const int origin[4] = {0, at.q_row0 + scope.row0(), at.head, at.tensor_batch};
  tma_store_rows<kTmaStoreRows>(maps.o, origin, tile, tile_row0);
  bulk_commit_group();
  bulk_wait_group_read<0>();
}

/// A consumer warpgroup's epilogue: LSE straight out; this warp's rows of O into the
/// warpgroup's rows of Q's tile, then one TMA store of the warpgroup's 64 rows
/// (tma_store_rows), or with packed sequences bounded stores (store_packed_rows).
template <class Traits>
FJ_DEVICE void write_outputs(const acc_tile<16, Traits::kHeadDimPadded>& o, const row_vec<16>& lse,
                             const TmaForwardShared<Traits>& smem,
                             const AttentionForwardParams& params, const AttentionTmaMaps& maps,
                             const TmaForwardBlock& at, int thread) {
  const WarpgroupScope scope{thread};
  const int group_row0 = scope.row0(), warp_row0 = scope.warp_row0();
  // Persistent, the last O store from this Q slot (issued by the warpgroup's first thread, which
  // waits for it before it comes here) has read these rows: without Q loaded in between (a tile
  // with no key) nothing else orders the warpgroup's writes after it.
  if constexpr (Traits::kPersistent) scope.sync(TmaForwardBarrier::kWarpgroup);
  store_lse(lse, lse_rows(params, at.tensor_batch, at.head, at.q_row0), warp_row0, at.rows,
            scope.lane());
  store_fragments(o, smem.q, warp_row0, 0, scope.lane());
  if constexpr (Traits::kVarlen) {
    scope.sync(TmaForwardBarrier::kWarpgroup);  // the warpgroup's 64 rows are written
    store_packed_rows<Traits>(smem, params, at, group_row0, scope.index());
    return;  // (never persistent: no next tile's Q waits for these reads)
  }
  store_warpgroup_rows(smem.q, group_row0, maps, at, scope);
}

/// Where a consumer warpgroup is in the K and the V ring (kept across its CTA's tiles), and who
/// releases a slot. Only wgmma reads a slot that TMA filled, and a thread past the
/// wgmma_wait_group of the product that read it knows its warpgroup's whole product is done: so
/// one thread a warpgroup releases it, in a cluster (whose blocks fill each other's slots) one
/// a warpgroup and block, thread r of the warpgroup in the ring of rank r (FlashAttention-3's
/// consumer release): kReleases arrivals a slot, not 128 a warpgroup (each a remote arrival in
/// a cluster). Where the producer's threads write the slots themselves (an fp8 cache's
/// conversion, the fp8 forward's Vᵀ), every consumer thread releases, rank thread %
/// kClusterBlocks in a cluster, so each thread's own reads are ordered before those writes.
template <class Traits>
struct ConsumerSlots {
  static constexpr bool kElected = !Traits::kKvE4m3 && !Traits::kQkE4m3;
  static constexpr unsigned kReleases =
      kElected ? unsigned(Traits::kConsumerThreads / WarpgroupScope::kThreads *
                          Traits::kClusterBlocks)
               : unsigned(Traits::kConsumerThreads);
  RingPosition<Traits::kStages> k, v;

  /// Waits for the next K, whose slot S = Q Kᵀ reads.
  template <class Shared>
  FJ_DEVICE int wait_key(const Shared& smem) const {
    smem.k_ring.wait(k);
    return k.stage;
  }
  /// Waits for the next V, whose slot O += P V reads.
  template <class Shared>
  FJ_DEVICE int wait_value(const Shared& smem) const {
    smem.v_ring.wait(v);
    return v.stage;
  }
  /// S = Q Kᵀ has landed: K's slot goes back to the producer.
  template <class Shared>
  FJ_DEVICE void release_key(const Shared& smem) {
    release(smem.k_ring, k);
    k.advance();
  }
  /// O += P V has landed: V's slot goes back to the producer.
  template <class Shared>
  FJ_DEVICE void release_value(const Shared& smem) {
    release(smem.v_ring, v);
    v.advance();
  }

 private:
  FJ_DEVICE void release(const typename Traits::Ring& ring,
                         const RingPosition<Traits::kStages>& at) const {
    constexpr unsigned kBlocks = Traits::kClusterBlocks;
    const unsigned rank = threadIdx.x % kBlocks;
    if constexpr (kElected && kBlocks > 1) {
      // (A predicated arrival: a branch around it spilled the modifier kernels at 128.)
      ring.release_in_if(at, rank, threadIdx.x % WarpgroupScope::kThreads < kBlocks);
    } else if constexpr (kElected) {
      if (threadIdx.x % WarpgroupScope::kThreads == 0) ring.release(at);
    } else if constexpr (kBlocks > 1) {
      ring.release_in(at, rank);
    } else {
      ring.release(at);
    }
  }
};

/// Consumer (a warpgroup's 128 threads), one tile, Q landed: the online softmax over the key
/// blocks, then O and LSE.
template <class Traits, class Shared>
FJ_DEVICE void attend(const Shared& smem, const AttentionForwardParams& params,
                      const AttentionTmaMaps& maps, const TmaForwardBlock& at,
                      ConsumerSlots<Traits>& slots, int thread) {
  const ConsumerRows<Traits> rows(params, at, WarpgroupScope{thread});

  acc_tile<16, Traits::kHeadDimPadded> o;  // (16, kHeadDimPadded): this warp's rows, unnormalized
  fill(o, 0.0f);
  ProbabilitySoftmax<Traits> softmax;  // m, ℓ
  for (int block = at.keys.begin; block < at.keys.end; ++block) {
    acc_tile<16, Traits::kBlockN> s;  // (16, kBlockN) scores
    const int k_stage = slots.wait_key(smem);
    warpgroup_abt(s, smem.q, rows.group_row0, smem.k(k_stage));  // S = Q Kᵀ
    slots.release_key(smem);
    rows.cap_and_mask(s, params, at, block * Traits::kBlockN);  // S = −inf where masked
    softmax.update(s, o, rows.scale);                           // P = 2^((S − m)·c), O·α
    ProbabilityOperand<Traits> p;
    p.set(s, smem, thread);
    const int v_stage = slots.wait_value(smem);
    p.multiply_async(o, smem, v_stage, thread);  // O += P V
    wgmma_wait_group<0>();
    slots.release_value(smem);
  }
  const row_vec<16> lse = softmax.finish(o, rows.scale);  // O /= ℓ
  descale_values<Traits>(o, params, at);
  write_outputs(o, lse, smem, params, maps, at, thread);  // (Traits from smem)
}

/// O's rescale by α in the overlapped loop. Up to a padded head dim of 128, at once, after the
/// wait for the previous P V. Above, O's 96 to 128 multiplies a thread would hold up the next
/// products there: they wait until the next S = Q Kᵀ is issued and run under it, right before
/// the next O += P V (FlashAttention-3's RescaleOBeforeGemm).
template <class Traits>
struct OutputRescale {
  static constexpr bool kUnderProduct = Traits::kHeadDimPadded > 128;
  row_vec<16> alpha;  // kUnderProduct: the rescale not yet applied

  FJ_DEVICE OutputRescale() { fill(alpha, 1.0f); }

  /// After the wait for P V: O = α·O, or α kept for before_product.
  FJ_DEVICE void after_product(acc_tile<16, Traits::kHeadDimPadded>& o,
                               const row_vec<16>& block_alpha) {
    if constexpr (kUnderProduct) {
      alpha = block_alpha;
    } else {
      mul_row(o, block_alpha);
    }
  }
  /// After the next S = Q Kᵀ's issue, before O += P V's: the kept rescale.
  FJ_DEVICE void before_product(acc_tile<16, Traits::kHeadDimPadded>& o) const {
    if constexpr (kUnderProduct) {
      wgmma_fence_operand(o);  // (after the S = Q Kᵀ just issued, not moved ahead of it)
      mul_row(o, alpha);
    }
  }
};

/// Consumer with the softmax overlapped (FlashAttention-3's IntraWGOverlap). Each step issues
/// block j's S = Q Kᵀ with block j − 1's O += P V and waits for S only, freeing K's slot; folds
/// S into the softmax while P V runs; then waits for P V, frees V's slot, rescales O to the new
/// maximum and keeps the new P. The first block's S is issued alone. No branch may sit between
/// a wgmma issue and its waits, or ptxas serializes the whole wgmma pipeline (its advisory
/// C7514), so the first block is either
///  - folded by the loop itself, entered at the fold (kRotated): O is still 0 and α is 0 there
///    (m was −inf), its wait for a product never issued returns at once, and it frees no V.
///    One copy of the softmax, the largest code in the kernel: 0.16 s less cold compile at head
///    dim 128 than peeled;
///  - or peeled off the loop (FlashAttention-3's way), for O of more than 96 registers a thread
///    (padded head dims above 192), where the rotated loop spills.
/// A step issues S as soon as K is in: the producer loads block j's K before block j − 1's V,
/// so waiting for both first would hold S behind a V it does not read (FlashAttention-3's
/// order).
template <class Traits, class Shared>
FJ_DEVICE void attend_overlapped(const Shared& smem,
                                 const AttentionForwardParams& params, const AttentionTmaMaps& maps,
                                 const TmaForwardBlock& at, ConsumerSlots<Traits>& slots,
                                 int thread) {
  constexpr bool kRotated = Traits::kHeadDimPadded <= 192;
  using Scores = acc_tile<16, Traits::kBlockN>;  // (16, kBlockN): this warp's rows of a block
  const ConsumerRows<Traits> rows(params, at, WarpgroupScope{thread});
  const ProductTurns<Traits::kPingpong> turns{WarpgroupScope{thread}.group()};

  acc_tile<16, Traits::kHeadDimPadded> o;  // (16, kHeadDimPadded): this warp's rows, unnormalized
  fill(o, 0.0f);
  ProbabilitySoftmax<Traits> softmax;  // m, ℓ
  ProbabilityOperand<Traits> p;  // the previous block's P
  OutputRescale<Traits> rescale;  // O's α
  // The first block's S = Q Kᵀ, alone, waited for; K's slot freed.
  const auto issue_first = [&](Scores& s) {
    turns.start(at.keys);
    const int k_stage = slots.wait_key(smem);
    turns.wait();
    warpgroup_abt_async(s, smem.q, rows.group_row0, smem.k(k_stage));  // S = Q Kᵀ
    turns.pass(at.keys, at.keys.begin);
    wgmma_wait_group<0>();
    slots.release_key(smem);
  };
  // Block `block`'s S = Q Kᵀ with the previous block's O += P V; S waited for, K's slot freed.
  const auto issue = [&](Scores& s, int block) {
    const int k_stage = slots.wait_key(smem);
    turns.wait();
    warpgroup_abt_async(s, smem.q, rows.group_row0, smem.k(k_stage));  // S = Q Kᵀ
    rescale.before_product(o);
    const int v_stage = slots.wait_value(smem);  // the previous block's V
    p.multiply_async(o, smem, v_stage, thread);                        // O += P V (previous)
    turns.pass(at.keys, block);
    wgmma_wait_group<1>();  // S landed; P V may still run
    slots.release_key(smem);
  };
  // Block `block`'s S into the softmax: S becomes P; returns α.
  const auto fold = [&](Scores& s, int block) {
    rows.cap_and_mask(s, params, at, block * Traits::kBlockN);  // S = −inf where masked
    return softmax.fold(s, rows.scale);                         // P = 2^((S − m')·c), under P V
  };
  // Waits for the previous P V (none before the first block: it returns at once), frees its
  // V's slot where there was one, and takes O to the new maximum (or keeps α for that).
  const auto land = [&](const row_vec<16>& block_alpha, bool after_product) {
    wgmma_wait_group<0>();
    if (after_product) slots.release_value(smem);
    rescale.after_product(o, block_alpha);  // O = α·O (or before the next product)
  };

  if (!at.keys.empty()) {
    if constexpr (kRotated) {
      Scores s;
      issue_first(s);
      for (int block = at.keys.begin;;) {
        land(fold(s, block), block != at.keys.begin);
        p.set(s, smem, thread);
        if (++block == at.keys.end) break;
        issue(s, block);
      }
    } else {
      {
        Scores s;
        issue_first(s);
        fold(s, at.keys.begin);  // O is still 0: α is not needed
        p.set(s, smem, thread);
      }
      for (int block = at.keys.begin + 1; block < at.keys.end; ++block) {
        Scores s;
        issue(s, block);
        land(fold(s, block), true);
        p.set(s, smem, thread);
      }
    }
    rescale.before_product(o);
    const int v_stage = slots.wait_value(smem);
    p.multiply_async(o, smem, v_stage, thread);  // O += P V (the last block)
    wgmma_wait_group<0>();
    slots.release_value(smem);
  }
  const row_vec<16> lse = softmax.finish(o, rows.scale);  // O /= ℓ
  descale_values<Traits>(o, params, at);
  write_outputs(o, lse, smem, params, maps, at, thread);  // (Traits from smem)
}

/// A consumer warpgroup whose rows all lie past seqlen_q (in a last, partly filled query
/// block): it computes nothing, but keeps the protocols the others rely on: it waits for each
/// slot of both rings before releasing it (an early release would count toward the slot's
/// previous phase) and takes its pingpong turns.
template <class Traits>
FJ_DEVICE void pass_keys(const TmaForwardShared<Traits>& smem, const TmaForwardBlock& at,
                         ConsumerSlots<Traits>& slots, int thread) {
  const ProductTurns<Traits::kPingpong> turns{WarpgroupScope{thread}.group()};
  turns.start(at.keys);
  for (int block = at.keys.begin; block < at.keys.end; ++block) {
    slots.wait_key(smem);
    slots.wait_value(smem);
    turns.wait();
    turns.pass(at.keys, block);
    slots.release_key(smem);
    slots.release_value(smem);
  }
}

}  // namespace flashjit
