#pragma once
// Thread block clusters (sm_90a): the blocks of a cluster are resident at once on neighbouring
// SMs and reach each other's shared memory at the same CTA-relative offsets. A kernel uses that
// to load a tile once for several blocks (a multicast TMA load writes the box into each block
// the mask names and completes on each one's mbarrier at the same offset), to tell a peer's
// producer that a slot is free again (an arrival on the peer's mbarrier) and to read a peer's
// partial sums (load_shared_cluster). An mbarrier a peer will use must be initialised, fenced
// (mbarrier_init_fence) and then ordered by a cluster barrier before the peer touches it, and
// a block must not exit while a peer may still reach into it: cluster_sync() at both ends. The
// emulator's twins check each of these rules (emulator/cluster.cpp).
#include "tile/tma.cuh"

namespace flashjit {

#if defined(FJ_DEVICE_CODE)

/// This block's rank in its cluster.
FJ_DEVICE unsigned cluster_ctarank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
/// Counts this thread toward the cluster barrier (release: its earlier writes are published).
FJ_DEVICE void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
/// Waits until every thread of the cluster arrived (acquire: the peers' writes are visible).
FJ_DEVICE void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/// One arrival on the mbarrier at `bar`'s offset in the block of rank `rank`.
FJ_DEVICE void mbarrier_arrive_cluster(mbarrier_t* bar, unsigned rank) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
          shared_address(bar)),
      "r"(rank)
      : "memory");
}

/// mbarrier_arrive_cluster by the threads whose `arrive` holds, as one predicated instruction:
/// every thread runs it, so a warp stays converged and no branch costs a register.
FJ_DEVICE void mbarrier_arrive_cluster_if(mbarrier_t* bar, unsigned rank, bool arrive) {
  asm volatile(
      "{\n.reg .b32 remote;\n.reg .pred p;\nsetp.ne.u32 p, %2, 0;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "@p mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
          shared_address(bar)),
      "r"(rank), "r"(static_cast<unsigned>(arrive))
      : "memory");
}

/// The float at `local`'s offset in the shared memory of the block of rank `rank`.
FJ_DEVICE float load_shared_cluster(const float* local, unsigned rank) {
  float value;
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %1, %2;\n"
      "ld.shared::cluster.f32 %0, [remote];\n}\n"
      : "=f"(value)
      : "r"(shared_address(local)), "r"(rank)
      : "memory");
  return value;
}

/// Loads the box at `coords` once into `shared_dst`'s offset of every block whose rank bit is
/// set in `cta_mask`, each completing on its mbarrier at `bar`'s offset. Ranks 2 to 4.
/// With an L2Evict hint (tile/tma.cuh) other than normal: rank 4 only.
template <L2Evict Evict = L2Evict::normal, int Rank>
FJ_DEVICE void tma_load_multicast(void* shared_dst, const tma_descriptor& map,
                                  const int (&coords)[Rank], mbarrier_t* bar,
                                  unsigned short cta_mask) {
  static_assert(Rank >= 2 && Rank <= 4, "tma_load_multicast: device PTX for ranks 2 to 4");
  static_assert(Evict == L2Evict::normal || Rank == 4, "tma_load_multicast: hinted is rank 4");
  const auto map_address = reinterpret_cast<unsigned long long>(&map);
  if constexpr (Evict != L2Evict::normal) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster.L2::cache_hint [%0], [%1, {%4, %5, %6, %7}], [%2], %3, %8;\n" ::"r"(
            shared_address(shared_dst)),
        "l"(map_address), "r"(shared_address(bar)), "h"(cta_mask), "r"(coords[0]), "r"(coords[1]),
        "r"(coords[2]), "r"(coords[3]), "l"(l2_cache_policy<Evict>())
        : "memory");
  } else if constexpr (Rank == 2) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;\n" ::"r"(shared_address(shared_dst)),
        "l"(map_address), "r"(shared_address(bar)), "h"(cta_mask), "r"(coords[0]), "r"(coords[1])
        : "memory");
  } else if constexpr (Rank == 3) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%4, %5, %6}], [%2], %3;\n" ::"r"(
            shared_address(shared_dst)),
        "l"(map_address), "r"(shared_address(bar)), "h"(cta_mask), "r"(coords[0]), "r"(coords[1]),
        "r"(coords[2])
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\n" ::"r"(
            shared_address(shared_dst)),
        "l"(map_address), "r"(shared_address(bar)), "h"(cta_mask), "r"(coords[0]), "r"(coords[1]),
        "r"(coords[2]), "r"(coords[3])
        : "memory");
  }
}

#else  // host twins: the emulator's model of the same instructions

inline unsigned cluster_ctarank() { return emulator::cluster_ctarank(); }
inline void cluster_arrive() { emulator::cluster_arrive(); }
inline void cluster_wait() { emulator::cluster_wait(); }
inline void mbarrier_arrive_cluster(mbarrier_t* bar, unsigned rank) {
  emulator::mbarrier_arrive_cluster(bar, rank);
}
inline void mbarrier_arrive_cluster_if(mbarrier_t* bar, unsigned rank, bool arrive) {
  if (arrive) emulator::mbarrier_arrive_cluster(bar, rank);
}
inline float load_shared_cluster(const float* local, unsigned rank) {
  float value = 0.0f;
  emulator::load_shared_cluster(local, rank, &value, sizeof value);
  return value;
}
template <L2Evict Evict = L2Evict::normal, int Rank>
inline void tma_load_multicast(void* shared_dst, const tma_descriptor& map,
                               const int (&coords)[Rank], mbarrier_t* bar,
                               unsigned short cta_mask) {
  static_assert(Rank >= 1 && Rank <= 5, "tma_load_multicast: rank 1 to 5");
  emulator::tma_load_multicast(shared_dst, map.map, coords, bar, cta_mask);
}

#endif

/// Every thread of the cluster arrives and waits: the cluster barrier in one step.
FJ_DEVICE void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

}  // namespace flashjit
