#pragma once
// A warpgroup's wgmma operands in shared memory, and the two products of attention on them
// (S = Q Kᵀ, O += P V), the building blocks of the Hopper forward (docs/hopper.md).
//
// Tiles use wgmma's interleaved layout without swizzle: 8 x 8 core matrices, each 8 rows of
// 16 contiguous bytes; a row's 16-byte chunks lie 128 bytes apart (one core matrix each) and
// 8-row groups one row of core matrices apart. The same layout serves a K-major operand (Q
// and K: rows are M or N, chunks run along K) and an MN-major one (V as the B of P V: rows are
// K, chunks run along N); the descriptors' leading and stride byte offsets swap between the two
// (PTX ISA, wgmma's matrix descriptor). No swizzle keeps the first Hopper kernels simple to
// check on the emulator; the 128-byte swizzle (bank-conflict free, and what TMA writes) comes with TMA.
//
// Each warp's share of a 64-row wgmma accumulator is an acc_tile<16, N>: the accumulator
// layout is the m16n8 C fragment per warp, register i being element i % 4 of 8-column group
// i / 4, so the register-tile operations (row_max, exp2, to_operand) apply unchanged.
#include "tile/operand_tile.cuh"
#include "tile/tma.cuh"
#include "tile/wgmma.cuh"

namespace flashjit {

/// A (Rows, Cols) tile of 16-bit T in shared memory, in wgmma's interleaved layout.
template <typename T, int Rows, int Cols>
struct core_matrix_tile {
  static_assert(Rows % 8 == 0 && Cols % 8 == 0, "whole 8 x 8 core matrices");
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kChunks = Cols / 8;           // 16-byte chunks per row
  static constexpr int kChunkBytes = 128;            // between a row's consecutive chunks
  static constexpr int kGroupBytes = 128 * kChunks;  // between consecutive 8-row groups
  static constexpr int kBytes = Rows * Cols * 2;
  T* data;

  /// The byte offset of the 16-byte chunk holding columns [8 chunk, 8 chunk + 8) of `row`.
  FJ_HOST_DEVICE static constexpr unsigned chunk_offset(int row, int chunk) {
    return row / 8 * kGroupBytes + chunk * kChunkBytes + row % 8 * 16;
  }
  /// That chunk.
  FJ_DEVICE T* chunk_at(int row, int chunk) const { return data + chunk_offset(row, chunk) / 2; }
};

/// Starts the block-wide copy of global rows [0, rows_valid), columns [0, cols_valid) (a
/// multiple of 8) into `dst`, zero-filling the rest; `src` points at element (0, 0), rows
/// `row_stride` elements apart. Then cp_async_commit, a wait, fence_proxy_async (cp.async
/// writes through the generic proxy, wgmma reads through the async one) and a barrier.
template <int Threads, typename T, int Rows, int Cols>
FJ_DEVICE void load_core_matrix_tile_async(core_matrix_tile<T, Rows, Cols> dst, const T* src,
                                           index_t row_stride, int rows_valid, int cols_valid,
                                           int thread) {
  using Tile = core_matrix_tile<T, Rows, Cols>;
#pragma unroll 1
  for (int i = thread; i < Rows * Tile::kChunks; i += Threads) {
    const int row = i / Tile::kChunks, chunk = i % Tile::kChunks;
    const bool valid = row < rows_valid && chunk * 8 < cols_valid;
    cp_async_16(dst.chunk_at(row, chunk), valid ? src + row * row_stride + chunk * 8 : src, valid);
  }
}

/// The descriptor of k16 step 0 of a K-major operand: rows [row0, row0 + 64) (A) or
/// [row0, row0 + N) (B) of `tile`, whose columns are K. LBO: the next 8 k; SBO: the next 8 rows.
template <typename T, int Rows, int Cols>
FJ_DEVICE unsigned long long k_major_descriptor(core_matrix_tile<T, Rows, Cols> tile, int row0) {
  using Tile = core_matrix_tile<T, Rows, Cols>;
  return advance_descriptor(
      make_descriptor(tile.data, Tile::kChunkBytes, Tile::kGroupBytes, WgmmaLayout::interleave),
      Tile::chunk_offset(row0, 0));
}
/// The bytes from k16 step 0 to step `step` of a K-major operand: two chunks per step.
template <typename T, int Rows, int Cols>
FJ_HOST_DEVICE constexpr unsigned k_major_step_bytes(core_matrix_tile<T, Rows, Cols>, int step) {
  return core_matrix_tile<T, Rows, Cols>::chunk_offset(0, 2 * step);
}

/// The descriptor of k16 step 0 of an MN-major operand: `tile`'s rows are K, its columns N.
/// LBO: the next 8 k (rows); SBO: the next 8 n (a chunk).
template <typename T, int Rows, int Cols>
FJ_DEVICE unsigned long long mn_major_descriptor(core_matrix_tile<T, Rows, Cols> tile) {
  using Tile = core_matrix_tile<T, Rows, Cols>;
  return make_descriptor(tile.data, Tile::kGroupBytes, Tile::kChunkBytes, WgmmaLayout::interleave);
}
/// The bytes from k16 step 0 to step `step` of an MN-major operand: 16 rows per step.
template <typename T, int Rows, int Cols>
FJ_HOST_DEVICE constexpr unsigned mn_major_step_bytes(core_matrix_tile<T, Rows, Cols>, int step) {
  return core_matrix_tile<T, Rows, Cols>::chunk_offset(16 * step, 0);
}

/// Pins `acc`'s registers at this point of the program: the compiler may not move their earlier
/// writes after it, nor later ones before it (an empty asm that reads and writes each, as
/// CUTLASS's warpgroup_fence_operand). Arithmetic on registers no wgmma in flight reads has no
/// order against wgmma's asm otherwise: a rescale of O meant to run under the S = Q Kᵀ just
/// issued could be moved ahead of that issue (NVRTC 13 happens to keep it in place; nothing
/// obliges it to). Nothing on the emulator, which runs in order.
template <int Rows, int Cols>
FJ_DEVICE void wgmma_fence_operand(acc_tile<Rows, Cols>& acc) {
#if defined(FJ_DEVICE_CODE)
  for_each_in_row(acc, [](int, float& x) { asm volatile("" : "+f"(x)::"memory"); });
#else
  (void)acc;
#endif
}

/// An accumulator tile as the flat register array wgmma takes (the same registers in the same
/// order: see the file comment).
template <int Cols>
FJ_DEVICE float (&wgmma_registers(acc_tile<16, Cols>& acc))[Cols / 2] {
  return reinterpret_cast<float(&)[Cols / 2]>(acc.frag);
}

/// Issues acc = A Bᵀ over all of K for the warpgroup's 64 rows as one wgmma group and returns
/// at once: A is rows [a_row0, a_row0 + 64) of `a`, B rows [b_row0, b_row0 + N) of `b` (both
/// K-major; the row offsets multiples of 8, whole swizzle atoms); this
/// warp's 16 rows land in `acc` at the wgmma_wait_group that completes the group, and `acc`
/// must not be touched before. Every thread of the warpgroup calls it. `Tile` is any shared
/// layout with k_major_descriptor, mn_major_descriptor and their _step_bytes overloads (step 0's
/// descriptor is made once, each step adds its offset): core_matrix_tile here,
/// swizzled_tile (tile/swizzled_tile.cuh) for TMA-loaded operands.
template <typename T, int N, int K, int ARows, int BRows, template <typename, int, int> class Tile>
FJ_DEVICE void warpgroup_abt_async(acc_tile<16, N>& acc, Tile<T, ARows, K> a, int a_row0,
                                   Tile<T, BRows, K> b, int b_row0 = 0) {
  static_assert(K % 16 == 0 && ARows % 64 == 0, "whole k16 steps, 64-row warpgroup blocks");
  static_assert(N <= BRows, "B's N rows within its tile");
  const unsigned long long a_desc = k_major_descriptor(a, a_row0),
                           b_desc = k_major_descriptor(b, b_row0);
  wgmma_fence();  // acc's registers were written before: order them before the wgmma
#pragma unroll
  for (int step = 0; step < K / 16; ++step) {
    wgmma_ss<T, N>(wgmma_registers(acc), advance_descriptor(a_desc, k_major_step_bytes(a, step)),
                   advance_descriptor(b_desc, k_major_step_bytes(b, step)), /*scale_d=*/step > 0);
  }
  wgmma_commit_group();
}

/// warpgroup_abt_async, then waits for it: returns once the product is in `acc`: S = Q Kᵀ.
template <typename T, int N, int K, int ARows, template <typename, int, int> class Tile>
FJ_DEVICE void warpgroup_abt(acc_tile<16, N>& acc, Tile<T, ARows, K> a, int a_row0,
                             Tile<T, N, K> b) {
  warpgroup_abt_async(acc, a, a_row0, b);
  wgmma_wait_group<0>();
}

/// Issues acc += P B over K as one wgmma group and returns at once: P is this warp's 16 rows in
/// registers (to_operand), B the (K, N) tile `b` (MN-major: V as stored, one key per row). The
/// sum lands in `acc` at the wgmma_wait_group that completes the group; `acc` must not be
/// touched before. Every thread of the warpgroup calls it. `Tile` as for warpgroup_abt.
template <typename T, int N, int K, template <typename, int, int> class Tile>
FJ_DEVICE void warpgroup_ab_async(acc_tile<16, N>& acc, const operand_tile<T, 16, K>& p,
                                  Tile<T, K, N> b) {
  static_assert(K % 16 == 0, "whole k16 steps");
  const unsigned long long b_desc = mn_major_descriptor(b);
  wgmma_fence();  // P's and acc's registers were written before
#pragma unroll
  for (int step = 0; step < K / 16; ++step) {
    wgmma_rs<T, N, /*TransB=*/true>(wgmma_registers(acc), p.frag[0][step],
                                    advance_descriptor(b_desc, mn_major_step_bytes(b, step)),
                                    /*scale_d=*/true);
  }
  wgmma_commit_group();
}

/// Issues acc += P B over K as one wgmma group and returns at once, with B given transposed:
/// P is this warp's 16 rows in registers (to_e4m3_operand), `b_t` the (N, K) tile of Bᵀ (K-major:
/// Vᵀ, one head-dim column a row, as fp8 operands must be). As the MN-major form, the sum lands
/// at the wgmma_wait_group that completes the group.
template <typename T, int N, int K, template <typename, int, int> class Tile>
FJ_DEVICE void warpgroup_ab_transposed_async(acc_tile<16, N>& acc, const operand_tile<T, 16, K>& p,
                                             Tile<T, N, K> b_t) {
  static_assert(K % 16 == 0, "whole k steps");
  const unsigned long long b_desc = k_major_descriptor(b_t, 0);
  wgmma_fence();  // P's and acc's registers were written before
#pragma unroll
  for (int step = 0; step < K / 16; ++step) {
    wgmma_rs<T, N>(wgmma_registers(acc), p.frag[0][step],
                   advance_descriptor(b_desc, k_major_step_bytes(b_t, step)), /*scale_d=*/true);
  }
  wgmma_commit_group();
}

/// Issues acc += A B over K as one wgmma group, both operands in shared memory: A is rows
/// [a_row0, a_row0 + 64) of `a` (K-major: P as the warpgroup stored it), B the (K, N) tile
/// `b` (MN-major: V as stored). As the register form, the sum lands at the wgmma_wait_group
/// that completes the group.
template <typename T, int N, int K, int ARows, template <typename, int, int> class Tile>
FJ_DEVICE void warpgroup_ab_async(acc_tile<16, N>& acc, Tile<T, ARows, K> a, int a_row0,
                                  Tile<T, K, N> b) {
  static_assert(K % 16 == 0 && ARows % 64 == 0, "whole k16 steps, 64-row warpgroup blocks");
  const unsigned long long a_desc = k_major_descriptor(a, a_row0), b_desc = mn_major_descriptor(b);
  wgmma_fence();  // acc's registers were written before
#pragma unroll
  for (int step = 0; step < K / 16; ++step) {
    wgmma_ss<T, N, /*TransA=*/false, /*TransB=*/true>(
        wgmma_registers(acc), advance_descriptor(a_desc, k_major_step_bytes(a, step)),
        advance_descriptor(b_desc, mn_major_step_bytes(b, step)), /*scale_d=*/true);
  }
  wgmma_commit_group();
}

/// Issues acc = Aᵀ B over rows [k0, k0 + K) of both tiles as one wgmma group, both operands in
/// shared memory and MN-major: A's rows are K and its 64 columns the warpgroup's M (dSᵀ as the
/// backward stores it, keys by queries), B's rows are K and its columns N (K as loaded, keys by
/// head dim); k0 a multiple of 16. The product replaces `acc` at the wgmma_wait_group that
/// completes the group: dQ = dS K over one warpgroup's keys.
template <int K, typename T, int N, int ARows, int BRows, template <typename, int, int> class Tile>
FJ_DEVICE void warpgroup_atb_async(acc_tile<16, N>& acc, Tile<T, ARows, 64> a, Tile<T, BRows, N> b,
                                   int k0) {
  static_assert(K % 16 == 0 && K <= ARows && K <= BRows, "whole k16 steps within both tiles");
  const unsigned long long a_desc =
      advance_descriptor(mn_major_descriptor(a), mn_major_step_bytes(a, k0 / 16));
  const unsigned long long b_desc =
      advance_descriptor(mn_major_descriptor(b), mn_major_step_bytes(b, k0 / 16));
  wgmma_fence();  // acc's registers were written before
#pragma unroll
  for (int step = 0; step < K / 16; ++step) {
    wgmma_ss<T, N, /*TransA=*/true, /*TransB=*/true>(
        wgmma_registers(acc), advance_descriptor(a_desc, mn_major_step_bytes(a, step)),
        advance_descriptor(b_desc, mn_major_step_bytes(b, step)), /*scale_d=*/step > 0);
  }
  wgmma_commit_group();
}

/// warpgroup_ab_async, then waits for it: returns once the sum is in `acc`: O += P V.
template <typename T, int N, int K, template <typename, int, int> class Tile>
FJ_DEVICE void warpgroup_ab(acc_tile<16, N>& acc, const operand_tile<T, 16, K>& p,
                            Tile<T, K, N> b) {
  warpgroup_ab_async(acc, p, b);
  wgmma_wait_group<0>();
}

}  // namespace flashjit
