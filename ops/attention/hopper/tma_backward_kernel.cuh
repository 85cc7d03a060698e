#pragma once
// The warp-specialized Hopper backward (sm_90a), FlashAttention-3's structure: one CTA per block
// of Bc keys of one key/value head, K and V loaded once by TMA and kept in shared memory while
// the query blocks that see them stream past (every query head sharing them, GQA's sum). A
// producer warpgroup, one of whose threads issues TMA loads, brings each block's Q and dO into a
// ring of slots; one or two consumer warpgroups of 64 keys each compute, per block,
//   Sᵀ = K Qᵀ,  dPᵀ = V dOᵀ                   (wgmma, both operands as TMA wrote them),
//   Pᵀ = 2^(Sᵀ − LSE),  dSᵀ = Pᵀ ∘ (dPᵀ − D)  (registers, the other backward's element steps),
//   dV += Pᵀ dOᵢ,  dK += dSᵀ Qᵢ               (wgmma, Pᵀ and dSᵀ from registers),
//   dQᵢ (+)= dS K over the warpgroup's keys   (wgmma from the dSᵀ it stored in shared memory),
// or, above a padded head dim of 128 (Traits::kSharedKeys), two warpgroups share 64 keys: each
// computes Sᵀ and dPᵀ for half the block's queries, both store their halves of Pᵀ and dSᵀ in
// shared memory, then one accumulates dV += Pᵀ dOᵢ and the other dK += dSᵀ Qᵢ from there, and
// they split dQᵢ's columns, so that no thread holds more than one head-dim-wide gradient;
// and hand dQ's partial sum over: the warpgroup stages it in fp32 in shared memory and goes on,
// and the dQ writer, a warp of the producer warpgroup, adds it into the fp32 workspace with a
// bulk reduction (cp.reduce.async.bulk, tile/bulk_reduce.cuh), so no math warp waits on atomics
// or on the copy engine. The dQ-convert kernel rounds the sum, scaled, into dQ afterwards. dK and
// dV leave once, staged in the warpgroup's dQ staging block. Where two Q/dO stages leave no room
// for a staging block (Traits::kDqFromRegisters: head dim 256), the consumers add dQ from their
// registers with vector reductions instead, and dK and dV are staged in the Q slots. Each step's
// LSE and D arrive with its Q and dO (attention/parts/row_stats.cuh). In the deterministic mode the
// writer's sums into each query block take turns, from the last key block that sees it down
// (FlashAttention-3's semaphores and order, tile/semaphore.cuh, tma_backward_order.cuh): the same
// additions in the same order on every run, each waiting for the one before to land; the math
// warps never wait for a turn.
// Packed sequences (Traits::kVarlen): each CTA rebases the params to its sequence (a dense batch
// of one, as the other backward's kernels do) and TMA reads from the sequence's first row; the
// rows a box brings in past the sequence's end are zeroed in shared memory before any product
// reads them, so the block computes what TMA's zero fill gives a dense tensor's last block.
//
// At a padded head dim of 64 the query blocks are 128 rows (Traits::kBlockM), FlashAttention-3's
// 128 x 128: Pᵀ and dSᵀ then go through shared memory (kOperandsInShared), and dQ is two wgmmas.
//
// Not done yet: Bc of three warpgroups, the overlap of one block's element steps with the next
// block's products.
#include "attention/hopper/tma_backward_order.cuh"
#include "attention/hopper/tma_backward_traits.cuh"
#include "attention/parts/backward_params.cuh"
#include "attention/parts/backward_scores.cuh"
#include "attention/parts/backward_sequence.cuh"
#include "attention/parts/block_mask_ranges.cuh"
#include "attention/parts/dq_accum_layout.cuh"
#include "attention/parts/head_tensor.cuh"
#include "attention/parts/mask.cuh"
#include "tile/bulk_reduce.cuh"
#include "tile/operand_tile.cuh"
#include "tile/semaphore.cuh"
#include "tile/warpgroup_scope.cuh"

namespace flashjit {

/// Where a sequence's row 0 is in a tensor TMA reads (the coordinates of its map): dense, row 0
/// of its batch; packed (cu_seqlens given; the map holds one batch of every row), row `start`.
struct TmaRows {
  int row0;
  int batch;
};

FJ_DEVICE TmaRows tma_rows(const int* cu_seqlens, int sequence) {
  if (cu_seqlens == nullptr) return {0, sequence};
  return {load_global_index(cu_seqlens, sequence), 0};
}

/// Where a CTA works: Bc keys from key0 of (batch, kv_head), and the steps that stream past
/// them: every query block that sees them, of each query head sharing them, head by head.
template <class Traits>
struct TmaBackwardBlock {
  int batch;     // in the params (0 once rebased to a packed sequence)
  int sequence;  // the batch entry or packed sequence (the modifiers' b)
  int kv_head;
  int key0;
  int keys;           // valid keys from key0 (at most Bc)
  BlockRange blocks;  // the query blocks (of Br rows) that see them, in every head
  int heads_per_kv;
  TmaRows queries, key_rows;  // where Q and dO, K and V start for TMA
  int stats0;                 // the block of row statistics of the sequence's head 0, row 0
  int stats_per_head;         // and its blocks a head (attention/parts/row_stats.cuh)

  /// `p` rebased to the CTA's sequence where packed; `token0` the sequence's first query row in
  /// the batch's (first_query_token, taken before the rebase).
  FJ_DEVICE TmaBackwardBlock(const AttentionBackwardParams& p, int batch_, TmaRows queries_,
                             TmaRows key_rows_, index_t token0)
      : batch(batch_),
        sequence(blockIdx.z),
        kv_head(blockIdx.y),
        key0(tma_backward_key_block(int(blockIdx.x), int(gridDim.x), Traits::kDeterministic) *
             Traits::kBlockN),
        keys(min_int(Traits::kBlockN, p.seqlen_k - key0)),
        blocks{0, 0},
        heads_per_kv(p.heads_per_kv),
        queries(queries_),
        key_rows(key_rows_),
        stats0(int(row_stats_block(token0, sequence, p.heads_q, 0, p.seqlen_q, 0))),
        stats_per_head(ceil_div(p.seqlen_q, kRowStatRows)) {
    const KeyWindow<Traits::kMask> window(p);
    if (keys > 0) blocks = window.query_blocks(key0, key0 + keys - 1, Traits::kBlockM, p.seqlen_q);
    // A block mask's cut, but not in the deterministic mode: its turns count every key block
    // after this one that the window lets see a query block (dq_turn).
    if constexpr (!Traits::kDeterministic) {
      blocks =
          query_blocks_seeing<Traits::kBlockM>(p.block_mask, batch, kv_head * heads_per_kv,
                                               heads_per_kv, key0, key0 + keys, p.seqlen_q, blocks);
    }
  }
  FJ_DEVICE int steps() const {
    return blocks.empty() ? 0 : heads_per_kv * (blocks.end - blocks.begin);
  }
  /// The query head of step `step`.
  FJ_DEVICE int head(int step) const {
    return kv_head * heads_per_kv + step / (blocks.end - blocks.begin);
  }
  /// The first query row of step `step`'s block.
  FJ_DEVICE int row0(int step) const {
    return (blocks.begin + step % (blocks.end - blocks.begin)) * Traits::kBlockM;
  }
  /// The block of row statistics of step `step`'s query block (a coordinate of their map).
  FJ_DEVICE int stats_block(int step) const {
    return stats0 + head(step) * stats_per_head + row0(step) / kRowStatRows;
  }
  /// In the deterministic mode, the turn of this key block's dQ sum into the query block at
  /// `row0` (tma_backward_order.cuh: the key blocks after this one that see it come first).
  FJ_DEVICE int dq_turn(const AttentionBackwardParams& p, int row0) const {
    const int last_row = min_int(row0 + Traits::kBlockM, p.seqlen_q) - 1;
    return tma_backward_dq_turn(KeyWindow<Traits::kMask>(p), key0 / Traits::kBlockN, last_row,
                                Traits::kBlockN);
  }
  /// Query row `row0` of `head` in the contiguous (batch, heads_q, seqlen_q) arrays: D, and dQ's
  /// sums (rows of head_dim floats).
  FJ_DEVICE index_t query_row_index(const AttentionBackwardParams& p, int head, int row0) const {
    return (index_t(batch) * p.heads_q + head) * p.seqlen_q + row0;
  }
};

/// The two halves of a block of row statistics (attention/parts/row_stats.cuh).
enum class RowStat : int { lse_base2 = 0, delta = 1 };

/// One value per query column of a warp's (keys, queries) tile: statistic `stat` of the slot's
/// rows from `row0` (`stats`: the slot's blocks, in shared memory), or `past` past the block's
/// `rows` valid rows (which the delta kernel leaves unwritten). A lane's columns come in
/// adjacent pairs, one 8-byte read each. Read where it is used, so that it holds registers only
/// there.
template <int Cols>
FJ_DEVICE col_vec<Cols> stat_columns(const float* stats, RowStat stat, int row0, int rows,
                                     float past, int lane) {
  col_vec<Cols> values;
  const float* const column = stats + int(stat) * kRowStatRows;  // block 0's
  const float* const lane_column = column + fragment_col(0, 0, lane);
#pragma unroll
  for (int g = 0; g < Cols / 8; ++g) {
    // Group g's 8 rows (row0 is a multiple of 8), the lane's pair of them.
    const int group_row = row0 + 8 * g;
    const int row = group_row + fragment_col(0, 0, lane);  // even; row + 1 is the pair's other
    float first, second;
    if constexpr (Cols > kRowStatRows) {
      // Past one block (Br 128): the group's rows lie in one, whose offset, the same for every
      // lane, makes each read a constant from one address; a block taken per lane kept 16 to
      // 32 addresses live and spilled.
      load_shared_pair(lane_column,
                       group_row / kRowStatRows * kRowStatFloats + group_row % kRowStatRows, first,
                       second);
    } else {
      load_shared_pair(column, row, first, second);  // (the form above spilled at head dim 256)
    }
    values.v[g][0] = row < rows ? first : past;
    values.v[g][1] = row + 1 < rows ? second : past;
  }
  return values;
}

/// Producer (one thread): K and V once, then each step's Q, dO and row statistics into the next
/// free slot, on the slot's one barrier.
template <class Traits>
FJ_DEVICE void load_query_blocks(const TmaBackwardShared<Traits>& smem,
                                 const AttentionBackwardTmaMaps& maps,
                                 const TmaBackwardBlock<Traits>& at) {
  using QTile = typename Traits::QTile;
  const int kv_origin[4] = {0, at.key_rows.row0 + at.key0, at.kv_head,
                            at.key_rows.batch};  // (dim, row, head, batch)
  mbarrier_arrive_expect_tx(smem.kv_full, 2 * Traits::KVTile::kBytes);
  tma_load_tile(smem.k, maps.k, kv_origin, smem.kv_full);
  tma_load_tile(smem.v, maps.v, kv_origin, smem.kv_full);
  RingPosition<Traits::kStages> slot;
  for (int step = 0; step < at.steps(); ++step, slot.advance()) {
    mbarrier_t* full = smem.ring.acquire(slot, 2 * QTile::kBytes + Traits::kStatFloats * 4);
    const int origin[4] = {0, at.queries.row0 + at.row0(step), at.head(step), at.queries.batch};
    tma_load_tile(smem.q(slot.stage), maps.q, origin, full);
    tma_load_tile(smem.dout(slot.stage), maps.dout, origin, full);
    // One box a block of statistics; with Br 128 the second may be the next head's (or past
    // the map, zero-filled), read only for rows past the sequence, which take `past` instead.
#pragma unroll
    for (int block = 0; block < Traits::kBlockM / kRowStatRows; ++block) {
      const int stats_origin[2] = {0, at.stats_block(step) + block};
      tma_load(smem.stats(slot.stage) + block * kRowStatFloats, maps.row_stats, stats_origin, full);
    }
  }
}

/// How the consumer warpgroups share a block's dQ = dS K. Two warpgroups at a padded head dim
/// of whole 128-column pairs of panels, or sharing their keys, each take a part of dQ's columns
/// over all Bc keys (FlashAttention-3's split: half the accumulator registers, which head dims
/// from 128 need), whole 64-column panels (where a wgmma's B may start), and stage one block for
/// one bulk reduction; otherwise each takes all the columns over its own 64 keys and stages its
/// own block. The "team" is the threads that share a staging block:
/// both warpgroups, or one. A team and the dQ writer hand its staging block back and forth on
/// two named barriers: "free" (the writer arrives once at the start and after each reduction
/// has read the block; the team waits before staging) and "staged" (the team arrives; the writer
/// waits), so each side waits only when the other is a whole block behind.
/// The warp-specialized backward's named barriers (bar.sync ids; 0 is __syncthreads'), every
/// one the kernel uses, for `Groups` consumer warpgroups. Enumerators, not static data members:
/// NVRTC would emit those as PTX globals.
template <int Groups>
struct TmaBackwardBarrier {
  enum : int {
    /// 1 + g: warpgroup g's 128 threads alone (WarpgroupScope::sync): its rows are staged.
    kWarpgroup = 1,
    /// Every consumer thread (with split columns, the one dQ team).
    kConsumers = 1 + Groups,
    /// kHandOver + 2 t: dQ team t's staging block is free again (the team and the writer warp
    /// wait); kHandOver + 2 t + 1: the team has staged it (the team arrives, the writer waits).
    kHandOver = kConsumers + 1,
  };
};

template <class Traits>
struct QueryGradientShare {
  static constexpr int kGroups = Traits::kGroups;
  static constexpr int kPanels = Traits::kHeadDimPadded / 64;
  static constexpr bool kSplitColumns = kGroups == 2 && (Traits::kSharedKeys || kPanels % 2 == 0);
  // The first warpgroup's columns, and the second's: the rest (one panel fewer at 192).
  static constexpr int kCols = kSplitColumns ? (kPanels + 1) / 2 * 64 : Traits::kHeadDimPadded;
  static constexpr int kLastCols = kSplitColumns ? Traits::kHeadDimPadded - kCols : kCols;
  static_assert(kLastCols > 0, "every warpgroup some of dQ's columns");
  static constexpr int kKeys = kSplitColumns ? Traits::kBlockN : WarpgroupScope::kRows;
  using Barrier = TmaBackwardBarrier<kGroups>;
  static constexpr int kTeams = kSplitColumns ? 1 : kGroups;  // dQ sums a CTA adds per block
  static constexpr int kTeamThreads =
      kSplitColumns ? Traits::kConsumerThreads : WarpgroupScope::kThreads;
  static constexpr int kHandOverThreads = kTeamThreads + 32;  // a team and the writer warp
  template <int Cols>
  using Columns = swizzled_tile<typename Traits::Element, Traits::kBlockN, Cols>;

  WarpgroupScope scope;

  /// The first of this warpgroup's dQ columns, and of its keys in the CTA's block.
  FJ_DEVICE int col0() const { return kSplitColumns ? scope.group() * kCols : 0; }
  FJ_DEVICE int key0() const { return kSplitColumns ? 0 : scope.row0(); }
  /// K's Cols columns this warpgroup's dQ takes (whole panels of the tile).
  template <int Cols>
  FJ_DEVICE Columns<Cols> key_columns(typename Traits::KVTile k) const {
    return {k.data + col0() / 64 * Traits::KVTile::kPanelBytes / 2};
  }
  /// This team's index in the CTA (the order of its sums in the deterministic mode, and its
  /// staging block: smem.dq_block(team)).
  FJ_DEVICE int team() const { return kSplitColumns ? 0 : scope.group(); }
  /// Waits for the team.
  FJ_DEVICE void sync() const {
    if constexpr (kSplitColumns) {
      named_barrier_sync(Barrier::kConsumers, Traits::kConsumerThreads);
    } else {
      scope.sync(Barrier::kWarpgroup);
    }
  }
  /// The hand-over barriers of team `team`.
  FJ_DEVICE static int free_barrier(int team) { return Barrier::kHandOver + 2 * team; }
  FJ_DEVICE static int staged_barrier(int team) { return Barrier::kHandOver + 2 * team + 1; }
  /// Waits until the writer has read the team's staging block.
  FJ_DEVICE void wait_staging_free() const {
    named_barrier_sync(free_barrier(team()), kHandOverThreads);
  }
  /// Tells the writer that the team's block is staged (without waiting).
  FJ_DEVICE void hand_over() const {
    named_barrier_arrive(staged_barrier(team()), kHandOverThreads);
  }
};

/// A step's query block in dQ's fp32 workspace: its first row there and its valid rows.
struct QueryBlockRows {
  float* dq_accum;
  index_t first_row;
  int rows;
};

/// A consumer warpgroup's dK and dV (this warp's 16 keys by the head dim), or with shared keys
/// the one of them it owns, accumulated over the steps, and its dQ partial sums added into the
/// workspace.
template <class Traits>
struct KeyGradientAccumulator {
  using T = typename Traits::Element;
  using Grads = acc_tile<16, Traits::kHeadDimPadded>;
  static constexpr int kGradients = Traits::kSharedKeys ? 1 : 2;
  enum Kind : int { kKeyGradient = 0, kValueGradient = 1 };  // their rows in the staging block
  // dK then dV; with shared keys the owned one: dV in warpgroup 0, dK in warpgroup 1.
  Grads gradients[kGradients];

  FJ_DEVICE void clear() {
    for (Grads& g : gradients) fill(g, 0.0f);
  }
  /// Which gradient gradients[i] is.
  FJ_DEVICE static Kind kind(int i, WarpgroupScope scope) {
    if constexpr (Traits::kSharedKeys) return scope.group() == 0 ? kValueGradient : kKeyGradient;
    return Kind(i);
  }
  /// This warpgroup's first key in the block: its own 64, or with shared keys the block's.
  FJ_DEVICE static int key_row0(WarpgroupScope scope) {
    return Traits::kSharedKeys ? 0 : scope.row0();
  }

  /// Whether dK += dSᵀ Q (registers and the step's Q) is issued after dQ's product, to run
  /// under dQ's staging (FlashAttention-3's order), and dV += Pᵀ dO before the dSᵀ barrier:
  /// where the registers allow, with their own keys at a padded head dim of 64 (at 128 either
  /// spilled 16 bytes: dQ's accumulators living on beside dK's product, or Pᵀ's beside dSᵀ's
  /// store). With shared keys the key gradients come first: their shared Pᵀ and dSᵀ must be
  /// read before the team's barrier in the staging lets the other warpgroup write the next
  /// step's.
  static constexpr bool kKeyGradientLast = !Traits::kSharedKeys && Traits::kHeadDimPadded <= 64;
  /// Whether dV += Pᵀ dO and dK += dSᵀ Q read Pᵀ and dSᵀ from shared memory, as
  /// FlashAttention-3 does, rather than from registers: with Br 128, where the two operands (32
  /// registers each) beside dQ's accumulators spilled 304 to 336 bytes, Pᵀ's alone 232. Pᵀ goes
  /// in the warpgroup's dQ staging block, free from the writer's read of the last step's dQ to
  /// this step's staging (before which dV's product is waited for); dSᵀ where dQ's product
  /// reads it. dV's product is issued after the warpgroup's barrier, dK's after dQ's.
  static constexpr bool kOperandsInShared = !Traits::kSharedKeys && Traits::kBlockM > 64;
  static_assert(!kOperandsInShared || kKeyGradientLast, "dK's product issued after dQ's");
  /// This warpgroup's Pᵀ (its 64 keys by the block's queries) in its staging block.
  using ValueOperand = swizzled_tile<T, WarpgroupScope::kRows, Traits::kBlockM>;
  FJ_DEVICE static ValueOperand value_operand(const TmaBackwardShared<Traits>& smem,
                                              WarpgroupScope scope) {
    return {reinterpret_cast<T*>(smem.dq_block(scope.group()))};
  }
  /// dSᵀ's 64-query panels: one, or two with Br 128 (each the A of one of dQ's wgmmas).
  static constexpr int kQueryPanels = Traits::kBlockM / 64;
  using QueryPanel = swizzled_tile<T, Traits::kBlockN, 64>;
  FJ_DEVICE static QueryPanel query_panel(typename Traits::ScoreTile ds_t, int panel) {
    return {ds_t.data + panel * Traits::ScoreTile::kPanelBytes / int(sizeof(T))};
  }

  /// Every step of `at` (after K and V have landed).
  FJ_DEVICE void accumulate(const TmaBackwardShared<Traits>& smem, const AttentionBackwardParams& p,
                            const TmaBackwardBlock<Traits>& at, int thread) {
    const WarpgroupScope scope{thread};
    mbarrier_wait_parity(smem.kv_full, 0);
    if (Traits::kVarlen && at.keys < Traits::kBlockN) {
      clear_past_sequence(smem.k, smem.v, at.keys, thread);
    }
    RingPosition<Traits::kStages> slot;
    for (int step = 0; step < at.steps(); ++step, slot.advance()) {
      smem.ring.wait(slot);
      const int rows = p.seqlen_q - at.row0(step);
      if (Traits::kVarlen && rows < Traits::kBlockM) {
        clear_past_sequence(smem.q(slot.stage), smem.dout(slot.stage), rows, thread);
      }
      accumulate_block(smem, p, at, at.head(step), at.row0(step), slot.stage, scope);
      smem.ring.release(slot);  // its wgmmas have read Q and dO
    }
  }

  /// Scales dK and writes both, staged in the warpgroup's dQ staging block as rows of head_dim
  /// elements (dK's 64 rows, then dV's), then its valid keys to dk and dv, 16 bytes a thread at a
  /// time. (Not in K's and V's tiles: with QueryGradientShare's column split the other
  /// warpgroup's dQ = dS K reads every row of K until its own last block.)
  FJ_DEVICE void write(const TmaBackwardShared<Traits>& smem, const AttentionBackwardParams& p,
                       const TmaBackwardBlock<Traits>& at, int thread) {
    constexpr int kHeadDim = Traits::kHeadDim;
    constexpr int kRows = WarpgroupScope::kRows;
    const WarpgroupScope scope{thread};
    // (2 · 64, head_dim): dK's rows, then dV's; with shared keys both warpgroups' one block.
    // Without a staging block (dQ from registers) the Q slots hold them, once every consumer
    // is done with its last step's products.
    T* const staged =
        Traits::kDqFromRegisters
            ? smem.q(0).data
            : reinterpret_cast<T*>(smem.dq_block(Traits::kSharedKeys ? 0 : scope.group()));
    const int warp_row0 = scope.warp_row0() - scope.row0();  // the warp's rows of the 64
    if constexpr (Traits::kDqFromRegisters) {
      named_barrier_sync(TmaBackwardBarrier<Traits::kGroups>::kConsumers, Traits::kConsumerThreads);
    } else {
      QueryGradientShare<Traits>{scope}.wait_staging_free();  // the last reduction has read it
    }
#pragma unroll
    for (int i = 0; i < kGradients; ++i) {
      const Kind which = kind(i, scope);
      if (which == kKeyGradient) scale_tile(gradients[i], p.scale);
      for_each_element(gradients[i], scope.lane(), [&](int r, int c, float& value) {
        if (c < kHeadDim) {
          store_shared(staged, (which * kRows + warp_row0 + r) * kHeadDim + c,
                       from_float<T>(value));
        }
      });
    }
    scope.sync(TmaBackwardBarrier<Traits::kGroups>::kWarpgroup);  // the warpgroup's rows are staged
    constexpr int kChunksPerRow = kHeadDim / kChunkElements;
    const int rows = min_int(kRows, at.keys - key_row0(scope));
    const auto* chunks = reinterpret_cast<const Chunk16*>(staged);
#pragma unroll 1
    for (int chunk = scope.index(); chunk < rows * kChunksPerRow; chunk += 128) {
      const int row = chunk / kChunksPerRow, col = chunk % kChunksPerRow * kChunkElements;
      const int key = at.key0 + key_row0(scope) + row;
#pragma unroll
      for (int i = 0; i < kGradients; ++i) {
        const Kind which = kind(i, scope);
        const HeadTensor& out = which == kKeyGradient ? p.dk : p.dv;
        // dV's rows are head_dim_v wide. Packed sequences take head_dim_v = head_dim only (the
        // calls with Sequences refuse another): the check there made those forms spill.
        if (!Traits::kVarlen && which != kKeyGradient && col >= p.head_dim_v) continue;
        store_global_raw(reinterpret_cast<Chunk16*>(out.rows<T>(at.batch, at.kv_head, key) + col),
                         load_shared(chunks, which * kRows * kChunksPerRow + chunk));
      }
    }
  }

 private:
  /// Packed sequences: zeroes the lines of two tiles TMA filled past the sequence's end (from
  /// `first`), every consumer thread a share, and waits for all of them before any wgmma reads.
  template <class Tile>
  FJ_DEVICE static void clear_past_sequence(Tile a, Tile b, int first, int thread) {
    clear_lines(a, first, thread, Traits::kConsumerThreads);
    clear_lines(b, first, thread, Traits::kConsumerThreads);
    fence_proxy_async();  // generic writes, read by wgmma
    named_barrier_sync(TmaBackwardBarrier<Traits::kGroups>::kConsumers, Traits::kConsumerThreads);
  }

  /// One step: query block `row0` of `head`, its Q and dO in ring slot `stage`.
  FJ_DEVICE void accumulate_block(const TmaBackwardShared<Traits>& smem,
                                  const AttentionBackwardParams& p,
                                  const TmaBackwardBlock<Traits>& at, int head, int row0, int stage,
                                  WarpgroupScope scope) {
    constexpr int kBlockM = Traits::kBlockM;
    // The queries whose scores this warpgroup computes: all, or with shared keys its half.
    constexpr int kQueries = Traits::kSharedKeys ? kBlockM / 2 : kBlockM;
    const int query0 = Traits::kSharedKeys ? scope.group() * kQueries : 0;
    const int lane = scope.lane();
    const int rows = min_int(kBlockM, p.seqlen_q - row0);
    const int keys0 = key_row0(scope);                                // its keys in the block
    const int warp_keys0 = keys0 + scope.warp_row0() - scope.row0();  // and this warp's 16
    const typename Traits::QTile q = smem.q(stage), dout = smem.dout(stage);
    acc_tile<16, kQueries> s, dp;  // (keys, queries): Sᵀ, then Pᵀ; dPᵀ, then dSᵀ
    warpgroup_abt_async(s, smem.k, keys0, q, query0);      // Sᵀ = K Qᵀ
    warpgroup_abt_async(dp, smem.v, keys0, dout, query0);  // dPᵀ = V dOᵀ
    wgmma_wait_group<1>();                                 // Sᵀ is in
    ScoreScaling<Traits::kSoftcap, 16, kQueries> scaling;
    scaling.scale(s, p);                       // Sᵀ·scale·log2 e
    const auto position = [&](int r, int c) {  // of element (r, c): key row r, query column c
      const int key = at.key0 + warp_keys0 + r, row = query0 + c;
      return ScorePosition{row < rows && key < p.seqlen_k, head, row0 + row, key};
    };
    ModifiedScores<typename Traits::Modifiers, 16, kQueries> modified;
    modified.apply(s, at.sequence, position, p.captures, lane);  // score_mod, mask_mod
    const KeyWindow<Traits::kMask> window(p);
    if (!window.block_fully_visible(row0, row0 + rows - 1, at.key0 + keys0,
                                    WarpgroupScope::kRows)) {
      mask_scores_transposed(window, s, at.key0 + warp_keys0, row0 + query0, lane);
    }
    // Pᵀ = 2^(Sᵀ − LSE); +inf past the valid rows, so their P is 0
    const float* stats = smem.stats(stage);  // arrived with Q and dO
    exp2_sub_col(s, stat_columns<kQueries>(stats, RowStat::lse_base2, query0, rows,
                                           -negative_infinity(), lane));
    wgmma_wait_group<0>();  // dPᵀ is in
    const index_t first_row = at.query_row_index(p, head, row0);
    sub_col(dp, stat_columns<kQueries>(stats, RowStat::delta, query0, rows, 0.0f, lane));
    mul_elements(dp, s);  // dSᵀ = Pᵀ ∘ (dPᵀ − D)
    // Each (key, query) pair's dS is made once, here: the captures' gradients are added here only.
    modified.add_capture_gradients(dp, at.sequence, position, p.captures, lane);
    modified.chain(dp, lane);  // through score_mod
    scaling.chain(dp);         // through softcap
    using Share = QueryGradientShare<Traits>;
    const Share share{scope};
    // Pᵀ's and dSᵀ's registers: the A of dV's and dK's products, which read them until the
    // wait in add_query_gradients, so they live to the step's end, not the branch's.
    [[maybe_unused]] operand_tile<T, 16, kBlockM> p_t, ds_t;
    if constexpr (Traits::kSharedKeys || kOperandsInShared) {
      issue_from_shared(s, dp, smem, share, warp_keys0, query0, q, dout);
    } else {
      p_t = to_operand<T>(s);
      ds_t = to_operand<T>(dp);
      // Needing nothing from the team, dV's product runs under the barrier where it goes first.
      if constexpr (kKeyGradientLast) warpgroup_ab_async(gradients[kValueGradient], p_t, dout);
      store_fragments(dp, smem.ds_t, warp_keys0, 0, lane);  // the A of dQ = dS K
      fence_proxy_async();                                  // generic writes, read by wgmma
      share.sync();                                         // the team's dSᵀ rows are in
      if constexpr (!kKeyGradientLast) {
        warpgroup_ab_async(gradients[kValueGradient], p_t, dout);  // dV += Pᵀ dO
        warpgroup_ab_async(gradients[kKeyGradient], ds_t, q);      // dK += dSᵀ Q
      }
    }
    const QueryBlockRows block{p.dq_accum, first_row, rows};
    const auto issue_after = [&] {
      if constexpr (kOperandsInShared) {
        warpgroup_ab_async(gradients[kKeyGradient], smem.ds_t, keys0, q);
      } else if constexpr (kKeyGradientLast) {
        warpgroup_ab_async(gradients[kKeyGradient], ds_t, q);
      }
    };
    if constexpr (Share::kCols == Share::kLastCols) {
      add_query_gradients<Share::kCols>(share, smem, block, issue_after);
    } else if (scope.group() == 0) {  // the warpgroups' parts of dQ differ in width
      add_query_gradients<Share::kCols>(share, smem, block, issue_after);
    } else {
      add_query_gradients<Share::kLastCols>(share, smem, block, issue_after);
    }
  }

  /// Pᵀ and dSᵀ (this warp's rows of them) into shared memory, then the products that read them
  /// there first: with shared keys, both warpgroups' halves of the block's queries, then
  /// dV += Pᵀ dO in warpgroup 0 and dK += dSᵀ Q in warpgroup 1; with kOperandsInShared, Pᵀ in
  /// the warpgroup's staging block once the writer has read the last dQ from it, then dV's
  /// product (dK's follows dQ's).
  template <int Queries>
  FJ_DEVICE void issue_from_shared(const acc_tile<16, Queries>& s, const acc_tile<16, Queries>& dp,
                                   const TmaBackwardShared<Traits>& smem,
                                   QueryGradientShare<Traits> share, int warp_keys0, int query0,
                                   typename Traits::QTile q, typename Traits::QTile dout) {
    const WarpgroupScope scope = share.scope;
    const int lane = scope.lane();
    if constexpr (Traits::kSharedKeys) {
      store_fragments(s, smem.p_t, warp_keys0, query0, lane);
      store_fragments(dp, smem.ds_t, warp_keys0, query0, lane);
      fence_proxy_async();  // generic writes, read by wgmma
      share.sync();         // both halves are in
      const bool values = kind(0, scope) == kValueGradient;
      warpgroup_ab_async(gradients[0], values ? smem.p_t : smem.ds_t, 0, values ? dout : q);
    } else {
      share.wait_staging_free();  // the writer has read the last dQ: Pᵀ may take the block
      store_fragments(s, value_operand(smem, scope), warp_keys0 - key_row0(scope), 0, lane);
      store_fragments(dp, smem.ds_t, warp_keys0, 0, lane);  // the A of dQ's and dK's products
      fence_proxy_async();                                  // generic writes, read by wgmma
      share.sync();                                         // the warpgroup's rows are in
      warpgroup_ab_async(gradients[kValueGradient], value_operand(smem, scope), 0, dout);
    }
  }

  /// dQ = dS K over the team's keys in this warpgroup's Cols columns, then its staging
  /// (stage_query_gradients). `issue_after` issues the products that follow dQ's (dK's, where
  /// kKeyGradientLast): dQ's is waited for alone, so its staging, and any wait there for the
  /// writer, runs under them; they are waited for at the end.
  template <int Cols, class IssueAfter>
  FJ_DEVICE static void add_query_gradients(QueryGradientShare<Traits> share,
                                            const TmaBackwardShared<Traits>& smem,
                                            const QueryBlockRows& block, IssueAfter issue_after) {
    using Share = QueryGradientShare<Traits>;
    acc_tile<16, Cols> dq[kQueryPanels];  // the block's rows 64 at a time (one wgmma's M)
#pragma unroll
    for (int panel = 0; panel < kQueryPanels; ++panel) {
      warpgroup_atb_async<Share::kKeys>(dq[panel], query_panel(smem.ds_t, panel),
                                        share.template key_columns<Cols>(smem.k), share.key0());
    }
    issue_after();
    constexpr int kAfter = kKeyGradientLast ? 1 : 0;  // dK's product
    wgmma_wait_group<kAfter>();                       // dQ's products, and every one before them
    // Every warp's dV product has read Pᵀ from the staging block that dQ's staging overwrites.
    if constexpr (kOperandsInShared) share.sync();
    if constexpr (Traits::kDqFromRegisters) {
      static_assert(kQueryPanels == 1, "dQ from registers with Br 64 only");
      // The team's products have read its Pᵀ and dSᵀ: the next step may write them (the
      // staging's hand-over barrier says so otherwise).
      share.sync();
      reduce_query_gradients(dq[0], share, block);
    } else {
      stage_query_gradients(dq, share, smem, block.first_row);
    }
    if constexpr (kAfter > 0) wgmma_wait_group<0>();  // the later products' operands are free
  }

  /// Adds this warp's rows of its warpgroup's part of dQ into the workspace's rows of the
  /// block (dq_accum's layout: head_dim columns, permuted per row), its valid rows only, with
  /// 8-byte vector reductions straight from the accumulators (Traits::kDqFromRegisters).
  template <int Cols>
  FJ_DEVICE static void reduce_query_gradients(acc_tile<16, Cols>& dq,
                                               QueryGradientShare<Traits> share,
                                               const QueryBlockRows& block) {
    constexpr int kHeadDim = Traits::kHeadDim;
    const WarpgroupScope scope = share.scope;
    const int lane = scope.lane();
    const int warp_row0 = scope.warp_row0() - scope.row0();  // the warp's rows of the block
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // rows g and g + 8 of the warp's 16
      const int row = warp_row0 + fragment_row(0, half, lane);
      if (row >= block.rows) continue;
      const index_t line = (block.first_row + row) * kHeadDim;
      const int column_xor = dq_accum_column_xor(kHeadDim, block.first_row + row);
#pragma unroll
      for (int group = 0; group < dq.kGroups; ++group) {
        const int col = share.col0() + fragment_col(group, 0, lane);
        if (col < kHeadDim) {
          atomic_add_global_pair(block.dq_accum, line + (col ^ column_xor),
                                 dq.frag[0][group][2 * half], dq.frag[0][group][2 * half + 1]);
        }
      }
    }
  }

  /// Stages this warp's rows of its warpgroup's part of dQ (each query panel's) in fp32 once
  /// the writer has read the team's last block, and hands the block over. The block is
  /// dq_accum's rows from `first_row` as the bulk reduction adds them: head_dim columns,
  /// permuted per row (dq_accum_layout.cuh).
  template <int Cols>
  FJ_DEVICE static void stage_query_gradients(acc_tile<16, Cols> (&dq)[kQueryPanels],
                                              QueryGradientShare<Traits> share,
                                              const TmaBackwardShared<Traits>& smem,
                                              index_t first_row) {
    constexpr int kHeadDim = Traits::kHeadDim;
    const WarpgroupScope scope = share.scope;
    const int lane = scope.lane();
    const int warp_row0 = scope.warp_row0() - scope.row0();  // the warp's rows of a panel
    const int col0 = share.col0();
    float* const staging = smem.dq_block(share.team());
    if constexpr (!kOperandsInShared) share.wait_staging_free();  // else waited before Pᵀ
#pragma unroll
    for (int panel = 0; panel < kQueryPanels; ++panel) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // rows g and g + 8 of the warp's 16
        const int row = panel * 64 + warp_row0 + fragment_row(0, half, lane);
        float* const line = staging + row * kHeadDim;
        const int column_xor = dq_accum_column_xor(kHeadDim, first_row + row);
#pragma unroll
        for (int group = 0; group < acc_tile<16, Cols>::kGroups; ++group) {
          const int col = col0 + fragment_col(group, 0, lane);
          if (col < kHeadDim) {
            store_shared_pair(line, col ^ column_xor, dq[panel].frag[0][group][2 * half],
                              dq[panel].frag[0][group][2 * half + 1]);
          }
        }
      }
    }
    fence_proxy_async();  // generic writes, read by the bulk reduction
    share.hand_over();
  }
};

/// The dQ writer (a warp of the producer warpgroup; its first lane issues): for every step, each
/// team's staged partial dQ, its valid rows added into the workspace with one bulk reduction,
/// the staging block handed back once the reduction has read it. In the deterministic mode each
/// sum waits for its turn: after every sum of the key blocks after this one that see the query
/// block, and of the teams before this one, has landed; and passes the turn on once its own has.
template <class Traits>
FJ_DEVICE void write_query_gradients(const TmaBackwardShared<Traits>& smem,
                                     const AttentionBackwardParams& p,
                                     const TmaBackwardBlock<Traits>& at, int lane) {
  using Share = QueryGradientShare<Traits>;
  constexpr int kHeadDim = Traits::kHeadDim;
  for (int team = 0; team < Share::kTeams; ++team) {
    named_barrier_arrive(Share::free_barrier(team), Share::kHandOverThreads);
  }
  for (int step = 0; step < at.steps(); ++step) {
    const int row0 = at.row0(step);
    const int rows = min_int(Traits::kBlockM, p.seqlen_q - row0);
    const index_t batch_head = index_t(at.batch) * p.heads_q + at.head(step);
    [[maybe_unused]] int* const turns =
        Traits::kDeterministic ? dq_turn_counter(p, batch_head, row0) : nullptr;
    for (int team = 0; team < Share::kTeams; ++team) {
      named_barrier_sync(Share::staged_barrier(team), Share::kHandOverThreads);
      if (lane == 0) {
        if constexpr (Traits::kDeterministic) {  // after the sums before this one
          semaphore_wait_equal(turns, at.dq_turn(p, row0) * Share::kTeams + team);
        }
        bulk_reduce_add(p.dq_accum + (batch_head * p.seqlen_q + row0) * kHeadDim,
                        smem.dq_block(team), unsigned(rows) * kHeadDim * unsigned(sizeof(float)));
        bulk_commit_group();
        if constexpr (Traits::kDeterministic) {
          bulk_wait_group<0>();  // landed in global memory, not only read from the staging block
          semaphore_release_add(turns, 1);
        } else {
          bulk_wait_group_read<0>();
        }
      }
      __syncwarp();
      named_barrier_arrive(Share::free_barrier(team), Share::kHandOverThreads);
    }
  }
}

/// Grid (ceil(seqlen_k / Bc), heads_kv, batch) (packed: seqlen_k the longest sequence's; a CTA
/// past its own sequence's keys returns), block Traits::kThreads (the consumer
/// warpgroups, then the producer warpgroup), dynamic shared memory Traits::kSharedBytes; `maps`
/// as AttentionBackwardTmaMaps documents. params.dq_accum is zeroed before (the delta kernel)
/// and rounded into dq after (the dQ-convert kernel).
template <class Traits>
FJ_GLOBAL void __launch_bounds__(Traits::kThreads, 1)  // one CTA an SM: setmaxnreg's count
    attention_backward_tma_kernel(AttentionBackwardParams params,
                                  const FJ_GRID_CONSTANT AttentionBackwardTmaMaps maps) {
  const int thread = threadIdx.x;
  const int sequence = blockIdx.z;
  const index_t token0 = first_query_token(params, sequence);  // before any rebase
  TmaRows queries{0, sequence}, keys{0, sequence};
  if constexpr (Traits::kVarlen) {  // its own sequence, as a dense batch of one
    queries = tma_rows(params.sequences.cu_seqlens_q, sequence);
    keys = tma_rows(params.sequences.cu_seqlens_k, sequence);
    rebase_to_sequence<typename Traits::Element>(params, sequence);
  }
  const TmaBackwardBlock<Traits> at(params, Traits::kVarlen ? 0 : sequence, queries, keys, token0);
  if (at.keys <= 0) return;
  const TmaBackwardShared<Traits> smem =
      carve_tma_backward_shared<Traits>(dynamic_shared<unsigned char>());
  if (thread == 0) {
    mbarrier_init(smem.kv_full, 1);            // the producer's arrival (and K's, V's bytes)
    smem.ring.init(Traits::kConsumerThreads);  // every consumer thread releases each slot
  }
  __syncthreads();

  constexpr bool kMoveRegisters = Traits::kConsumerRegisters > 0;
  if (thread < Traits::kConsumerThreads) {
    if constexpr (kMoveRegisters) warpgroup_claim_registers<Traits::kConsumerRegisters>();
    KeyGradientAccumulator<Traits> gradients;
    gradients.clear();
    if (at.steps() > 0) gradients.accumulate(smem, params, at, thread);  // else dK = dV = 0
    gradients.write(smem, params, at, thread);
  } else {
    if constexpr (kMoveRegisters) warpgroup_release_registers<Traits::kProducerRegisters>();
    const int warp = (thread - Traits::kConsumerThreads) / 32;
    if (thread == Traits::kConsumerThreads && at.steps() > 0) {
      load_query_blocks<Traits>(smem, maps, at);
    } else if (warp == 1 && !Traits::kDqFromRegisters) {
      write_query_gradients<Traits>(smem, params, at, thread % 32);
    }
  }
}

}  // namespace flashjit
