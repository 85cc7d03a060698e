#pragma once
// The warp-specialized Hopper forward's sizes, validity predicates and configuration space
// (tma_forward_kernel.cuh). The host includes this file to enumerate, check and size configs;
// the kernel's traits static_assert the same predicates.

namespace flashjit {

/// Rows of O one TMA store writes: a consumer warpgroup's.
inline constexpr int kTmaStoreRows = 64;

/// Shared memory the kernel may use (sm_90: 227 KB per block).
inline constexpr int kTmaForwardSharedLimit = 227 * 1024;

/// Head dims of the tiles: whole 64-column (128-byte) swizzle panels. The columns past the head
/// dim arrive as TMA's zeros, add nothing to S and give O columns that are never stored.
constexpr int tma_forward_padded_head_dim(int head_dim) { return (head_dim + 63) / 64 * 64; }

/// Threads of a block with Br = block_m: one consumer warpgroup per 64 query rows, then the
/// producer warpgroup (a whole one, so that setmaxnreg, a warpgroup instruction, can take its
/// registers; one of its threads issues the loads).
constexpr int tma_forward_threads(int block_m) { return block_m / 64 * 128 + 128; }

/// Registers a thread of the consumer and of the producer warpgroups keep after setmaxnreg,
/// FlashAttention-3's split of the 64K register file: 240 and 24 with two
/// consumer warpgroups, 160 and 32 with three. One consumer warpgroup (256 threads) has 255 a
/// thread without it, so the kernel leaves registers alone there (0 here). In clusters
/// (`cluster_blocks` 2) the producer's multicast loads spill at 24 (8 bytes, NVRTC 13.0), so
/// two consumer warpgroups give it 40 and keep 232, which they fit in without spills. With an
/// fp8 cache (`kv_e4m3`) the whole producer warpgroup converts the staged blocks, which needs
/// more than 24 or 32: 232 and 40 with two consumer warpgroups, 152 and 56 with three.
struct TmaForwardRegisters {
  int consumer;
  int producer;
};
constexpr TmaForwardRegisters tma_forward_registers(int block_m, int cluster_blocks = 1,
                                                    bool kv_e4m3 = false) {
  return block_m == 128   ? (cluster_blocks > 1 || kv_e4m3 ? TmaForwardRegisters{232, 40}
                                                           : TmaForwardRegisters{240, 24})
         : block_m == 192 ? (kv_e4m3 ? TmaForwardRegisters{152, 56} : TmaForwardRegisters{160, 32})
                          : TmaForwardRegisters{0, 0};
}

/// Bytes of shared memory for (head_dim, Br, Bc, stages, P in shared memory, an fp8 cache, Q's
/// slots): Q's `q_slots` tiles (which O reuses on its way out), the K ring's and the V ring's
/// `stages` slots each, P's tile when it goes through shared memory, with an fp8 cache the
/// producer's two staging slots of fp8 bytes (tma_forward_loads.cuh), the barriers (Q's full and
/// empty ones, V's tail, a full and an empty one per slot, staging slots included), the
/// handed-over tiles' two slots and their barriers (TileHandOver, 64 bytes and 8 to align them),
/// a second Q slot's two barriers, and 1024 bytes to align the swizzled tiles.
constexpr int tma_forward_shared_bytes(int head_dim, int block_m, int block_n, int stages,
                                       bool p_in_shared = false, bool kv_e4m3 = false,
                                       int q_slots = 1) {
  const int padded = tma_forward_padded_head_dim(head_dim);
  const int tile = 2 * padded;  // bytes per row of a 16-bit tile
  return 1024 + q_slots * block_m * tile + 2 * stages * block_n * tile +
         (p_in_shared ? block_m * block_n * 2 : 0) + (kv_e4m3 ? 2 * block_n * padded : 0) +
         (3 + 4 * stages + (kv_e4m3 ? 4 : 0)) * 8 + 72 + (q_slots - 1) * 16;
}

/// Q's slots (tiles, each with its full and empty barrier): two where a persistent CTA has the
/// shared memory for them, so that the next tile's Q loads while this tile's last products run
/// and its O, staged in its own Q slot, leaves (FlashAttention-3 stages O over V's slots and
/// loads the next Q once the last S = Q Kᵀ has read this one; a second slot frees Q from the
/// O store without making the next tile's first V wait for it). One elsewhere: a CTA of one
/// tile loads one Q, and a persistent one without room waits for O's store before the next Q.
constexpr int tma_forward_q_slots(int head_dim, int block_m, int block_n, int stages,
                                  bool p_in_shared, bool kv_e4m3, bool persistent) {
  return persistent && tma_forward_shared_bytes(head_dim, block_m, block_n, stages, p_in_shared,
                                                kv_e4m3, 2) <= kTmaForwardSharedLimit
             ? 2
             : 1;
}

/// Whether the warp-specialized forward takes (head_dim, Br, Bc, stages, P in shared memory, an
/// fp8 cache): head dims 64 to 256, multiples of 8 (a row of 16-bit elements a whole number of
/// 16-byte chunks, as TMA's strides need; of 16 with an fp8 cache, whose rows are bytes); Br one
/// to three 64-row consumer warpgroups; Bc a multiple of 16 up to wgmma's N and TMA's box of
/// 256, and of 64 with P in shared memory (its tile is whole 128-byte swizzle panels); the whole
/// in shared memory; three consumer warpgroups (Br 192) only up to a padded head dim of 192: at
/// 256 a thread's 128 fp32 of O and S's Bc / 2 are already the 160 registers it gets
/// (tma_forward_registers), and ptxas refuses the kernel (C7602) rather than spill.
constexpr bool tma_forward_valid(int head_dim, int block_m, int block_n, int stages,
                                 bool p_in_shared = false, bool kv_e4m3 = false) {
  return head_dim % (kv_e4m3 ? 16 : 8) == 0 && head_dim >= 64 && head_dim <= 256 &&
         block_m % 64 == 0 && block_m >= 64 && block_m <= 192 &&
         (block_m < 192 || tma_forward_padded_head_dim(head_dim) <= 192) && block_n % 16 == 0 &&
         block_n >= 16 && block_n <= 256 && (!p_in_shared || block_n % 64 == 0) && stages >= 1 &&
         tma_forward_shared_bytes(head_dim, block_m, block_n, stages, p_in_shared, kv_e4m3) <=
             kTmaForwardSharedLimit;
}

/// Whether the consumers' schedule suits the tiles: the overlapped loop holds the previous
/// block's slot while it waits for the next (two stages at least); pingpong takes turns between
/// exactly two consumer warpgroups (Br 128) and runs with the overlapped loop, as
/// FlashAttention-3 has it.
constexpr bool tma_forward_schedule_valid(int block_m, int stages, bool overlap, bool pingpong) {
  return (!overlap || stages >= 2) && (!pingpong || (overlap && block_m == 128));
}

/// Whether K and V may be shared by a cluster of `cluster_blocks` CTAs (FlashAttention-3's
/// 2-CTA clusters): each CTA loads rows [r·Bc/2, (r+1)·Bc/2) of a key block and multicasts them
/// to both, so each reads half the K and V it uses from global memory. One CTA alone always;
/// two when they walk the same key blocks in step, as unmasked CTAs of one (head, batch) do,
/// one CTA per tile (the persistent and packed schedules give CTAs tiles of their own), and
/// each half is whole 8-row swizzle atoms (Bc a multiple of 16).
constexpr bool tma_forward_cluster_valid(int block_n, int cluster_blocks, bool masked,
                                         bool persistent, bool varlen) {
  return cluster_blocks == 1 ||
         (cluster_blocks == 2 && block_n % 16 == 0 && !masked && !persistent && !varlen);
}

/// Tiles of a launch (TileSchedule): ⌈seqlen_q / Br⌉ query blocks, rounded up to whole clusters
/// (a CTA past the last block has no row, but walks the keys with its peer), times `per_row`
/// (heads_q · batch).
constexpr long long tma_forward_tiles(long long query_blocks, long long per_row,
                                      int cluster_blocks) {
  return (query_blocks + cluster_blocks - 1) / cluster_blocks * cluster_blocks * per_row;
}

/// L2 a section of a masked launch's tiles may fill with its K and V (TileSchedule): about half
/// of an H100's or H200's 50-60 MB, so that the next section's first reads do not evict what
/// this one's last tiles still read.
constexpr long long kL2SectionBytes = 32ll << 20;

/// (batch, head)s in a section (TileSchedule): as many query heads as kL2SectionBytes holds the
/// K and V of (`row_elements` K and V elements a key, `heads_per_kv` query heads sharing them),
/// at least 1 and at most `per_row`, every (batch, head) of the launch.
constexpr int tma_forward_section(long long seqlen_k, int heads_per_kv, int per_row,
                                  int row_elements, int element_bytes) {
  const long long per_kv_head = seqlen_k * row_elements * element_bytes;
  const long long kv_heads = per_kv_head > 0 ? kL2SectionBytes / per_kv_head : per_row;
  const long long heads = kv_heads * (heads_per_kv > 0 ? heads_per_kv : 1);
  return int(heads < 1 ? 1 : heads > per_row ? per_row : heads);
}

/// Where tile `tile` of a one-CTA-a-tile launch falls (TileSchedule): its query block and its
/// place, (batch, head) = (place / heads_q, place % heads_q). Sections of `section` places,
/// each numbered query block by query block from the last down, its places fastest; the last
/// section holds what is left of the `per_row` places.
struct TmaTileSlot {
  int query_block, place;
};
constexpr TmaTileSlot tma_forward_tile_slot(int tile, int query_blocks, int per_row, int section) {
  const int first = tile / (section * query_blocks) * section;  // the section's first place
  const int width = section < per_row - first ? section : per_row - first;
  const int within = tile - first * query_blocks;
  return {query_blocks - 1 - within / width, first + within % width};
}

/// CTAs of a launch over `tiles` tiles (TileSchedule) on a GPU of `sm_count` SMs: one per SM
/// (a CTA takes most of an SM's shared memory), never more than there are tiles (one per tile
/// when the SM count is unknown, 0).
constexpr int tma_forward_ctas(long long tiles, int sm_count) {
  return int(sm_count > 0 && tiles > sm_count ? sm_count : tiles);
}

/// Whether a persistent launch takes its tiles from a counter (TileSchedule::kDynamic, and the
/// host's ForwardLaunch::takes_tiles): with a mask, whose tiles differ in length; not with an
/// fp8 cache, whose whole producer warpgroup runs the loads (its kernels, packed prefill, take
/// one tile a CTA anyway).
constexpr bool tma_forward_takes_tiles(bool persistent, bool masked, bool kv_e4m3) {
  return persistent && masked && !kv_e4m3;
}

/// The tiles the runtime offers on sm_90a: Br one to three consumer warpgroups, and Bc
/// FlashAttention-3's choices for 16-bit inputs (176 at head dim 128, 112
/// or 96 at 192, 80 at 256, 128 elsewhere) and 64.
inline constexpr int kTmaBlockM[] = {64, 128, 192};
inline constexpr int kTmaBlockN[] = {64, 80, 96, 112, 128, 176};

/// The stages (slots of the K ring and of the V ring each) the runtime offers: two,
/// FlashAttention-3's on sm_90, and three, which lets the loads run two blocks ahead of the
/// slowest consumer warpgroup where shared memory holds them.
inline constexpr int kTmaStages[] = {2, 3};

/// Whether the runtime offers (head_dim, Br, Bc, warps, stages, P in shared memory, an fp8
/// cache): a valid one (tma_forward_valid) with two or three stages, and `warps` counting the
/// producer warpgroup's 4.
constexpr bool tma_forward_config_valid(int head_dim, int block_m, int block_n, int warps,
                                        int stages, bool p_in_shared, bool kv_e4m3 = false) {
  return tma_forward_valid(head_dim, block_m, block_n, stages, p_in_shared, kv_e4m3) &&
         (stages == 2 || stages == 3) && warps * 32 == tma_forward_threads(block_m);
}

}  // namespace flashjit
