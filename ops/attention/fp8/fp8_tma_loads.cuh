#pragma once
// The producer warpgroup of the fp8 forward on TMA and wgmma (fp8_tma_kernel.cuh). Its first
// thread issues the TMA loads: Q once, each K block straight into a K slot (K-major as stored),
// each V block into a staging slot as row-major bytes. Then all 128 threads transpose the V
// block staged before (the next one's bytes are in flight meanwhile) into a Vᵀ slot, which P V
// reads K-major, fence, and arrive on the slot's full barrier (128 arrivals) and the staging
// slot's empty one. Each thread's barriers order its own writes, so no thread waits for another.
//
// Vᵀ's keys go in the order to_e4m3_operand gives P's columns (tile/e4m3.cuh): position 4t + j of
// each 16 holds key 2t + (j & 1) + 8 (j >> 1), so the products pair P's and V's keys alike.
#include "attention/fp8/fp8_tma_traits.cuh"
#include "attention/hopper/tma_forward_traits.cuh"
#include "attention/hopper/tma_tile_schedule.cuh"
#include "tile/warpgroup_scope.cuh"

namespace flashjit {

/// Vᵀ's 16-byte chunk for four head-dim columns (`col0` + i, i = 0..3) over keys 16·half ..
/// 16·half + 15 of a staged V block: word w of chunks[i] is positions 4w .. 4w + 3, keys 2w,
/// 2w + 1, 2w + 8, 2w + 9 of the 16. Sixteen 4-byte loads, each a whole row's consecutive words
/// across a warp (conflict-free).
template <class Staging>
FJ_DEVICE void gather_value_columns(Staging staging, int half, int col0, unsigned (&chunks)[4][4]) {
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    unsigned rows[4], columns[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = 16 * half + e4m3_value_row(0, w, j);
      rows[j] = load_shared(reinterpret_cast<const unsigned*>(staging.at(key, col0)), 0);
    }
    transpose_bytes(rows, columns);
#pragma unroll
    for (int i = 0; i < 4; ++i) chunks[i][w] = columns[i];
  }
}

/// chunks[i] = chunks[(i + by) % 4] for `by` in 0..3, by selects (no indexed registers).
FJ_DEVICE void rotate_chunks(unsigned (&chunks)[4][4], int by) {
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const unsigned c0 = chunks[0][w], c1 = chunks[1][w], c2 = chunks[2][w], c3 = chunks[3][w];
    const bool odd = by & 1, far = by & 2;
    const unsigned r0 = odd ? c1 : c0, r1 = odd ? c2 : c1, r2 = odd ? c3 : c2, r3 = odd ? c0 : c3;
    chunks[0][w] = far ? r2 : r0;
    chunks[1][w] = far ? r3 : r1;
    chunks[2][w] = far ? r0 : r2;
    chunks[3][w] = far ? r1 : r3;
  }
}

/// This thread's share of a staged V block (`staging`, keys by head dim) transposed into `values_t`
/// (head dim by keys, in P's key order). A task is four columns by a 16-key half of a 32-key step:
/// sixteen loads, four 16-byte stores. The eight threads of a quarter warp take consecutive
/// column groups and start their stores at different columns ((group / 2) % 4 ahead), so the
/// eight Vᵀ lines they write have distinct line indices mod 8 and their chunks, swizzled,
/// distinct banks.
template <class Traits>
FJ_DEVICE void transpose_values(typename Traits::StagingTile staging,
                                typename Traits::ValuesT values_t, int worker) {
  constexpr int kGroups = Traits::kHeadDimPadded / 4;     // four-column groups
  constexpr int kTasks = Traits::kBlockN / 16 * kGroups;  // times 16-key halves
#pragma unroll 1
  for (int task = worker; task < kTasks; task += WarpgroupScope::kThreads) {
    const int group = task % kGroups, half = task / kGroups;
    unsigned chunks[4][4];
    gather_value_columns(staging, half, 4 * group, chunks);
    const int turn = group / 2 % 4;
    rotate_chunks(chunks, turn);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const int row = 4 * group + (n + turn) % 4;
      const Chunk16 chunk{{chunks[n][0], chunks[n][1], chunks[n][2], chunks[n][3]}};
      store_shared(reinterpret_cast<Chunk16*>(values_t.at(row, 8 * half)), 0, chunk);
    }
  }
}

/// The producer warpgroup's loads of one tile, in the order the consumers use them.
template <class Traits>
struct Fp8TmaLoads {
  const Fp8TmaShared<Traits>& smem;
  const AttentionTmaMaps& maps;
  int worker;  // this thread in the producer warpgroup, 0 to 127
  RingPosition<Traits::kStages> k_slot, values_slot, staging, converting;
  bool pending = false;  // a staged V block waits for its transposition

  FJ_DEVICE Fp8TmaLoads(const Fp8TmaShared<Traits>& smem_, const AttentionTmaMaps& maps_,
                        int thread)
      : smem(smem_), maps(maps_), worker(thread - Traits::kConsumerThreads) {}

  /// Whether this thread issues the TMA loads and the barriers' single arrivals.
  FJ_DEVICE bool leader() const { return worker == 0; }

  /// Q's rows, read once (evict_first), on q_full.
  FJ_DEVICE void queries(const TmaForwardBlock& at) const {
    if (!leader()) return;
    const int origin[4] = {0, at.q_row0, at.head, at.tensor_batch};
    mbarrier_arrive_expect_tx(smem.q_full, Traits::QTile::kBytes);
    tma_load_tile<L2Evict::first>(smem.q, maps.q, origin, smem.q_full);
  }

  /// K's block `block` into the next free K slot. Kept in L2 (evict_last): the (batch, head)'s
  /// other query blocks read it too.
  FJ_DEVICE void keys(const TmaForwardBlock& at, int block) {
    if (leader()) {
      mbarrier_t* full = smem.k_ring.acquire(k_slot, Traits::KTile::kBytes);
      const int origin[4] = {0, at.k_row0 + block * Traits::kBlockN, at.kv_head, at.tensor_batch};
      tma_load_tile<L2Evict::last>(smem.k(k_slot.stage), maps.k, origin, full);
    }
    k_slot.advance();
  }

  /// V's block `block` into the next free staging slot; then the block staged before it
  /// transposed (flush), and this one kept waiting.
  FJ_DEVICE void values(const TmaForwardBlock& at, int block) {
    if (leader()) {
      mbarrier_t* full = smem.staging_ring.acquire(staging, Traits::StagingTile::kBytes);
      const int origin[4] = {0, at.k_row0 + block * Traits::kBlockN, at.kv_head, at.tensor_batch};
      tma_load<L2Evict::last>(smem.staging(staging.stage).data, maps.v, origin, full);
    }
    staging.advance();
    flush();
    pending = true;
  }

  /// This thread's share of the V block staged last, transposed into the next Vᵀ slot and
  /// announced. Last of a tile: the consumers wait for that block.
  FJ_DEVICE void flush() {
    if (!pending) return;
    hand_over_staged(smem.staging_ring, converting, smem.v_ring, values_slot, [&] {
      transpose_values<Traits>(smem.staging(converting.stage), smem.v(values_slot.stage), worker);
    });
    values_slot.advance();
    pending = false;
  }
};

}  // namespace flashjit
