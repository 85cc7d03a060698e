#pragma once
// A producer/consumer ring of shared-memory slots guarded by mbarriers (STYLE rule 15), the
// pipeline of a warp-specialized kernel: the producer waits for an empty slot, announces the
// bytes its TMA loads will bring and issues them on the slot's "full" barrier; each consumer
// waits for the slot to be full, uses it and releases it on its "empty" barrier. Slot index
// and phase parity live in a RingPosition that each side advances after every slot, never as
// loose integers.
#include "tile/cluster.cuh"
#include "tile/mbarrier.cuh"

namespace flashjit {

/// Where one side of a ring is: the slot it works on next and that slot's phase parity (which
/// flips each time the position wraps around).
template <int Stages>
struct RingPosition {
  static_assert(Stages >= 1, "a ring has at least one slot");
  int stage = 0;
  unsigned phase = 0;

  FJ_DEVICE void advance() {
    if (++stage == Stages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

/// The barriers of a ring of Stages slots, 2 x Stages mbarriers in shared memory (kBytes):
/// full[s] completes when slot s's loads have landed (the producer's arrivals plus the announced
/// transaction bytes), empty[s] when `consumers` threads have released it.
template <int Stages>
struct PipelineRing {
  static constexpr int kBytes = 2 * Stages * static_cast<int>(sizeof(mbarrier_t));
  mbarrier_t* barriers;  // full[0..Stages), then empty[0..Stages)

  /// By one thread, before the block's first barrier: the ring's phase 0, every slot empty.
  /// `producers` threads arrive on a full barrier: one that issues the loads (acquire), or each
  /// thread that fills the slot itself (acquire_unannounced, then mbarrier_arrive).
  FJ_DEVICE void init(unsigned consumers, unsigned producers = 1) const {
    for (int s = 0; s < Stages; ++s) {
      mbarrier_init(full(s), producers);
      mbarrier_init(empty(s), consumers);
    }
    mbarrier_init_fence();
  }

  /// Producer: waits until the slot at `at` is free and announces `bytes` of loads for it;
  /// returns the barrier the loads complete on. Every slot starts free: the producer waits on
  /// the phase before the consumers' first, which counts as complete.
  FJ_DEVICE mbarrier_t* acquire(const RingPosition<Stages>& at, unsigned bytes) const {
    mbarrier_wait_parity(empty(at.stage), at.phase ^ 1u);
    mbarrier_arrive_expect_tx(full(at.stage), bytes);
    return full(at.stage);
  }

  /// Producer, for a slot it finishes itself after its loads have landed: waits until the slot
  /// at `at` is free, as acquire does, without announcing anything; returns its full barrier,
  /// on which the producer arrives (mbarrier_arrive) once the slot holds what it should (each
  /// of the `producers` threads init counted, once its own share is there).
  FJ_DEVICE mbarrier_t* acquire_unannounced(const RingPosition<Stages>& at) const {
    mbarrier_wait_parity(empty(at.stage), at.phase ^ 1u);
    return full(at.stage);
  }
  /// Consumer: waits until the slot at `at` holds its loads.
  FJ_DEVICE void wait(const RingPosition<Stages>& at) const {
    mbarrier_wait_parity(full(at.stage), at.phase);
  }

  /// Consumer: this thread is done with the slot at `at`; the producer may refill it once
  /// every consumer has said so.
  FJ_DEVICE void release(const RingPosition<Stages>& at) const { mbarrier_arrive(empty(at.stage)); }

  /// Consumer, in a cluster whose blocks fill each other's slots (multicast): this thread's
  /// release of the slot at `at` counts in the ring of the block of rank `rank` (this block's
  /// own included), whose producer may refill the slot here once every block's consumers
  /// released it there.
  FJ_DEVICE void release_in(const RingPosition<Stages>& at, unsigned rank) const {
    mbarrier_arrive_cluster(empty(at.stage), rank);
  }
  /// release_in by the threads whose `release` holds, the others running it as a no-op (one
  /// predicated arrival: no branch, where one thread a warpgroup releases for the rest).
  FJ_DEVICE void release_in_if(const RingPosition<Stages>& at, unsigned rank, bool release) const {
    mbarrier_arrive_cluster_if(empty(at.stage), rank, release);
  }

 private:
  FJ_DEVICE mbarrier_t* full(int stage) const { return barriers + stage; }
  FJ_DEVICE mbarrier_t* empty(int stage) const { return barriers + Stages + stage; }
};

/// A producer thread's share of handing one staged block over to its consumers, where the
/// producer's threads rewrite a block TMA brought into a staging slot (an fp8 conversion, a
/// transposition) into a slot of the consumers' ring: once the staged bytes have landed (`staged`
/// of `staging`) and the destination (`slot` of `ring`) is free, `write()` writes this thread's
/// part, a proxy fence makes it visible to the consumers' wgmma, and the thread arrives on the
/// slot's full barrier and on the staging slot's empty one (`staged` then advances). Each
/// thread's arrivals order its own writes, so no thread waits for another; the rings count
/// every producer thread (init's `producers` and `consumers`).
template <int StagingStages, int Stages, class Write>
FJ_DEVICE void hand_over_staged(const PipelineRing<StagingStages>& staging,
                                RingPosition<StagingStages>& staged,
                                const PipelineRing<Stages>& ring, const RingPosition<Stages>& slot,
                                Write&& write) {
  staging.wait(staged);                                // its bytes landed
  mbarrier_t* full = ring.acquire_unannounced(slot);  // its slot is free
  write();
  fence_proxy_async();  // generic writes, read by the consumers' wgmma
  mbarrier_arrive(full);
  staging.release(staged);  // read: TMA may refill the staging slot
  staged.advance();
}

}  // namespace flashjit
