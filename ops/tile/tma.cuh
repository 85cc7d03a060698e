#pragma once
// TMA (sm_90a): one thread copies a whole box of a tensor between global and shared memory,
// described by a tensor map the host encodes (cuTensorMapEncodeTiled). A load completes on an
// mbarrier with complete_tx(box bytes), out-of-bounds elements (negative or past-the-end
// coordinates) zero-filled; a store writes only in-bounds elements and is tracked by bulk
// groups. Shared boxes are 128-byte aligned and laid out densely, dimension 0 innermost, with
// 16-byte chunks permuted by the map's swizzle. Generic-proxy writes to shared memory that a
// TMA store (or wgmma) then reads need fence_proxy_async() in between.
//
// tma_descriptor is the kernel parameter naming a tensor map, one type per backend:
//  - device: the 128-byte CUtensorMap itself, passed by value as a
//    `const FJ_GRID_CONSTANT tma_descriptor` parameter (its address is what the instructions
//    take, so it must stay in parameter space: __grid_constant__);
//  - emulator: a pointer to the host-side emulator::TensorMap (the decoded form of the same
//    arguments), which the host keeps alive for the launch.
// Either way the host builds it from the same fields; kernels only pass it by reference.
#include "tile/mbarrier.cuh"

#if defined(FJ_DEVICE_CODE)
#define FJ_GRID_CONSTANT __grid_constant__
#else
#define FJ_GRID_CONSTANT
#endif

namespace flashjit {

/// Where a TMA load's lines stand in L2's eviction order (PTX's .L2::cache_hint with a policy
/// from createpolicy): `normal` gives no hint; `last` keeps them over normal lines (K and V,
/// which the next query tiles of the same head read again), `first` lets them go before
/// (Q, read once). A hint, not a promise: data is the same either way, so the emulator's
/// twins take it and move the same bytes.
enum class L2Evict { normal, first, last };

#if defined(FJ_DEVICE_CODE)

/// The 64-bit cache policy of `Evict` (first or last) for the whole of the lines a load touches.
template <L2Evict Evict>
FJ_DEVICE unsigned long long l2_cache_policy() {
  static_assert(Evict != L2Evict::normal, "l2_cache_policy: normal loads take no policy");
  unsigned long long policy;
  if constexpr (Evict == L2Evict::last) {
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  } else {
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  }
  return policy;
}

/// The driver's opaque CUtensorMap (64-byte aligned, 128 bytes).
struct alignas(64) tma_descriptor {
  unsigned long long opaque[16];
};

/// Loads the box at `coords` (element indices, innermost first) into `shared_dst`, completing
/// on `bar`. Device PTX is written for ranks 2, 3 and 4.
/// With an L2Evict hint other than normal: rank 4 (the attention tensors' maps) only.
template <L2Evict Evict = L2Evict::normal, int Rank>
FJ_DEVICE void tma_load(void* shared_dst, const tma_descriptor& map, const int (&coords)[Rank],
                        mbarrier_t* bar) {
  static_assert(Rank >= 2 && Rank <= 4, "tma_load: device PTX is written for ranks 2 to 4");
  static_assert(Evict == L2Evict::normal || Rank == 4, "tma_load: hinted PTX is for rank 4");
  const auto map_address = reinterpret_cast<unsigned long long>(&map);
  if constexpr (Evict != L2Evict::normal) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".L2::cache_hint [%0], [%1, {%3, %4, %5, %6}], [%2], %7;\n" ::"r"(
            shared_address(shared_dst)),
        "l"(map_address), "r"(shared_address(bar)), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]),
        "r"(coords[3]), "l"(l2_cache_policy<Evict>())
        : "memory");
  } else if constexpr (Rank == 2) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(shared_address(shared_dst)),
        "l"(map_address), "r"(shared_address(bar)), "r"(coords[0]), "r"(coords[1])
        : "memory");
  } else if constexpr (Rank == 3) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(shared_address(shared_dst)),
        "l"(map_address), "r"(shared_address(bar)), "r"(coords[0]), "r"(coords[1]), "r"(coords[2])
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(shared_address(shared_dst)),
        "l"(map_address), "r"(shared_address(bar)), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]),
        "r"(coords[3])
        : "memory");
  }
}

/// Stores the box at `coords` from `shared_src` (in-bounds elements only).
template <int Rank>
FJ_DEVICE void tma_store(const tma_descriptor& map, const int (&coords)[Rank],
                         const void* shared_src) {
  static_assert(Rank >= 2 && Rank <= 4, "tma_store: device PTX is written for ranks 2 to 4");
  const auto map_address = reinterpret_cast<unsigned long long>(&map);
  if constexpr (Rank == 2) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
            map_address),
        "r"(shared_address(shared_src)), "r"(coords[0]), "r"(coords[1])
        : "memory");
  } else if constexpr (Rank == 3) {
    asm volatile(
        "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
            map_address),
        "r"(shared_address(shared_src)), "r"(coords[0]), "r"(coords[1]), "r"(coords[2])
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::
            "l"(map_address),
        "r"(shared_address(shared_src)), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]),
        "r"(coords[3])
        : "memory");
  }
}

/// Closes this thread's current group of TMA stores (and bulk reductions, tile/bulk_reduce.cuh).
FJ_DEVICE void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/// Waits until at most `Pending` of this thread's newest bulk groups are in flight.
template <int Pending>
FJ_DEVICE void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(Pending) : "memory");
}
/// Waits until at most `Pending` of this thread's newest bulk groups still read their shared
/// sources (their global writes may still be in flight): enough to reuse a stored tile.
template <int Pending>
FJ_DEVICE void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(Pending) : "memory");
}
/// Orders this thread's generic-proxy shared writes before later async-proxy reads of them.
FJ_DEVICE void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#else  // host twins: the emulator's model of the same instructions

/// The emulator's tensor map, by pointer.
struct tma_descriptor {
  const emulator::TensorMap* map = nullptr;
};

template <L2Evict Evict = L2Evict::normal, int Rank>
inline void tma_load(void* shared_dst, const tma_descriptor& map, const int (&coords)[Rank],
                     mbarrier_t* bar) {
  static_assert(Rank >= 1 && Rank <= 5, "tma_load: rank 1 to 5");
  emulator::tma_load(shared_dst, map.map, coords, bar);
}
template <int Rank>
inline void tma_store(const tma_descriptor& map, const int (&coords)[Rank],
                      const void* shared_src) {
  static_assert(Rank >= 1 && Rank <= 5, "tma_store: rank 1 to 5");
  emulator::tma_store(map.map, coords, shared_src);
}
inline void bulk_commit_group() { emulator::bulk_commit_group(); }
template <int Pending>
inline void bulk_wait_group() {
  emulator::bulk_wait_group(Pending);
}
template <int Pending>
inline void bulk_wait_group_read() {
  emulator::bulk_wait_group_read(Pending);
}
inline void fence_proxy_async() { emulator::fence_proxy_async_shared(); }

#endif

}  // namespace flashjit
