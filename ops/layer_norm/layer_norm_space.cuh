#pragma once
// The layer_norm op's configuration space and validity predicate, shared by the forward and
// the backward. The host includes this file to enumerate, check and size configs; the kernels
// static_assert the same predicate, so an illegal config is dropped before any compile.
namespace flashjit::layer_norm_space {

/// Row-length buckets: a config with max_cols > 0 handles rows of at most that many columns and
/// keeps its share of the row (and of γ, β) in registers; max_cols == 0 handles any length up
/// to kMaxCols, keeping the row in shared memory where it fits (layer_norm_stash). Every power
/// of two, so that the smallest bucket holding a row is at least half full: a row's threads
/// past its columns load nothing, and with buckets a factor 4 apart a 1536-column row kept
/// 192 of the 4096 bucket's 512 threads busy (12.8 KB an SM in flight where 32 KB are wanted).
constexpr int kMaxColsBuckets[] = {256, 512, 1024, 2048, 4096, 8192, 0};
/// Threads that share one row (whole warps; a block of fewer than kMinBlockThreads takes
/// further rows): each bucket's over 8 values a thread, and the wider and narrower shares.
constexpr int kThreadsPerRow[] = {32, 64, 128, 256, 512, 1024};
/// Neighbouring columns one access moves: 1, or as many as fill 16 bytes (8 of fp16 and bf16,
/// 4 of fp32). A warp's vectors are contiguous: lane l takes vector l of each step.
constexpr int kVectorWidths[] = {1, 4, 8};
constexpr int kVectorBytes = 16;
/// Register budget: above this many cached values per thread the backward would spill.
constexpr int kMaxValuesPerThread = 16;
/// Threads per block: rows are packed into blocks of at least this many threads (a block's rows
/// share its γ and β, and the backward's partial sums).
constexpr int kMinBlockThreads = 512;
/// Threads of the forward an SM holds: its persistent grid has this over the block's threads
/// blocks per SM, and its kernels' launch bounds ask ptxas for as many, so the grid is what the
/// SM holds at once (the grid had assumed 2048 threads while ptxas used 77 registers a thread,
/// so an SM held one block of 512, not four). The bounded buckets keep the row, γ, β, the bias
/// and the rows loaded ahead in registers, 94 to 108 a thread: one block of 512 threads.
constexpr int kForwardThreadsPerSm = 512;
constexpr int forward_blocks_per_sm(int block_threads) {
  return block_threads >= kForwardThreadsPerSm ? 1 : kForwardThreadsPerSm / block_threads;
}
/// Bytes an SM of a bounded kernel keeps loading ahead of the rows it works on (the forward's
/// x, the backward's x and dy), through each row's sums, barriers and stores, with every
/// thread of its rows loading: 4.8 TB/s (an H200) at 1.3 µs of latency over 132 SMs. A row
/// that fills three quarters of its bucket's threads (768 columns of 1024) still has 36 KB in
/// flight, what 4.8 TB/s needs at 1 µs. The register model below caps it where a config's
/// values leave too few (fp32's backward stays at one group, 64 bytes a thread). One row's 16
/// bytes a thread, waited for at the load, left 8 KB.
constexpr int kBytesInFlight = 48 * 1024;
/// Registers a thread of a bounded kernel holds besides its loads ahead: some a value of its
/// row share (the forward's x, γ, β and bias: 4; the backward's γ, three partial sums and the
/// row's terms: 6), some a vector access (addresses: 4) and about kRegisterBase more (sums,
/// counters), fitted to ptxas's counts. What is left of the thread's share of the SM's 64 K
/// registers (at most 128 at 512 threads, 64 at 1024) holds the loads ahead.
constexpr int kRegistersPerSm = 65536;
constexpr int kRegisterBase = 40;
constexpr int kRegistersPerVector = 4;
constexpr int kForwardRegistersPerValue = 4;
constexpr int kBackwardRegistersPerValue = 6;
/// Row groups a kernel loads ahead when an SM holds `sm_threads` of its threads (blocks per SM
/// times block size), each holding `values` of a row in `vectors` accesses, `value_registers`
/// registers a value, and a group's loads are `group_bytes` (counted in flight) in
/// `group_registers` registers (a fused residual's too): enough for kBytesInFlight within the
/// registers left (a scalar config's share takes a register an element, so it gets fewer bytes
/// ahead); none where no group fits, each group then loaded where it is used.
constexpr int row_groups_ahead(int sm_threads, int values, int vectors, int value_registers,
                               int group_bytes, int group_registers) {
  const int for_bytes = (kBytesInFlight / sm_threads + group_bytes - 1) / group_bytes;
  const int cap = kRegistersPerSm / sm_threads < 128 ? kRegistersPerSm / sm_threads : 128;
  const int held = value_registers * values + kRegistersPerVector * vectors + kRegisterBase;
  const int for_registers = (cap - held) / group_registers;
  const int groups = for_bytes < for_registers ? for_bytes : for_registers;
  return groups < 0 ? 0 : groups;
}
/// Vectors of a row a thread of the unbounded forward loads before using the first (of x and
/// of dy in the backward): 2 of 16 bytes at 1024 threads keep kBytesInFlight through the
/// forward's first pass, twice that through the backward's (4 spilled the forward at the 64
/// registers a thread that 1024 threads leave).
constexpr int kUnboundedLoadsAhead = 2;
/// The backward's blocks per SM: each writes one partial dγ, dβ, dbias that the second kernel
/// reads back, so the fewer the better once the SM's loads are enough in flight.
constexpr int kBackwardBlocksPerSm = 1;
/// The longest row the op accepts (fp32 counts are exact far beyond it).
constexpr int kMaxCols = 65536;
/// Bytes of shared memory per warp of a row for the cross-warp merge of a row's sums.
constexpr int kSharedBytesPerWarp = 16;

constexpr bool threads_valid(int threads_per_row) {
  return threads_per_row >= 32 && threads_per_row <= 1024 && threads_per_row % 32 == 0;
}

constexpr bool width_valid(int vector_width, int element_bytes) {
  return vector_width == 1 || vector_width * element_bytes == kVectorBytes;
}

constexpr bool config_valid(int max_cols, int threads_per_row, int vector_width,
                            int element_bytes) {
  if (!threads_valid(threads_per_row) || !width_valid(vector_width, element_bytes)) return false;
  if (max_cols == 0) return threads_per_row >= kMinBlockThreads;  // one row a block: the stash
  const int step = threads_per_row * vector_width;
  return max_cols > 0 && max_cols % step == 0 && max_cols / threads_per_row <= kMaxValuesPerThread;
}

constexpr int rows_per_block(int threads_per_row) {
  return threads_per_row >= kMinBlockThreads ? 1 : kMinBlockThreads / threads_per_row;
}

/// Dynamic shared memory of the cross-warp merge: one slot per warp of a row; none when a row
/// fits in one warp.
constexpr int merge_bytes(int threads_per_row) {
  const int warps_per_row = threads_per_row / 32;
  return warps_per_row > 1 ? rows_per_block(threads_per_row) * warps_per_row * kSharedBytesPerWarp
                           : 0;
}

/// The bounded buckets' shared memory past the merge slots when a block holds several rows:
/// one [max_cols] vector (γ, β or the bias on its way to every row slot's registers), or the
/// backward's partial sums.
constexpr int params_bytes(int max_cols, int threads_per_row) {
  return rows_per_block(threads_per_row) > 1 ? max_cols * 4 : 0;
}

/// The backward's partial sums (dγ, dβ, dbias) of a block's rows, added one row slot after the
/// other in shared memory when the block holds more than one row.
constexpr int partials_bytes(int max_cols, int threads_per_row) {
  return rows_per_block(threads_per_row) > 1 ? 3 * max_cols * 4 : 0;
}

constexpr int round_up16(int bytes) { return (bytes + 15) / 16 * 16; }

/// The unbounded config's stash: the row (x after the fused adds) and, when they fit too, the
/// [cols] vectors every row reads (γ, β and the bias), in the element type after the merge.
enum Stash : int { kStashNone = 0, kStashRow = 1, kStashRowAndVectors = 2 };

constexpr int stash_bytes(int cols, int element_bytes, int vectors, int stash) {
  const int row = round_up16(cols * element_bytes);
  return stash == kStashNone ? 0 : stash == kStashRow ? row : row * (1 + vectors);
}

/// The unbounded backward's stash, bits: the block's fp32 partial sums (dγ, dβ, dbias: the
/// planes the call writes), the row's x and dy for the second pass, and γ.
enum BackwardStash : int { kStashPartials = 1, kStashRows = 2, kStashGamma = 4 };

constexpr int partial_plane_bytes(int cols) { return round_up16(cols * 4); }

constexpr int backward_stash_bytes(int cols, int element_bytes, int planes, int stash) {
  const int row = round_up16(cols * element_bytes);
  return ((stash & kStashPartials) ? planes * partial_plane_bytes(cols) : 0) +
         ((stash & kStashRows) ? 2 * row : 0) + ((stash & kStashGamma) ? row : 0);
}

/// Blocks of a cluster that share each row (sm_90a), for rows whose stash does not fit one
/// block's shared memory: each block takes a contiguous chunk of the columns and keeps its
/// chunk of the row, γ, β and the partial sums; the row's sums cross the cluster through
/// distributed shared memory. Built for the unbounded bucket's 16-byte vectors at
/// kClusterThreads threads only (each size is a kernel of its own: __cluster_dims__).
constexpr int kClusterSizes[] = {2, 4, 8};
constexpr int kClusterThreads = 1024;

constexpr bool cluster_valid(int max_cols, int threads_per_row, int vector_width, int element_bytes,
                             int cluster) {
  if (cluster == 1) return true;
  return max_cols == 0 && threads_per_row == kClusterThreads &&
         vector_width * element_bytes == kVectorBytes &&
         (cluster == 2 || cluster == 4 || cluster == 8);
}

/// The columns each block of a cluster takes (the last block may take fewer): whole vectors.
constexpr int cluster_chunk(int cols, int cluster, int vector_width) {
  if (cluster == 1) return cols;
  const int share = (cols + cluster - 1) / cluster;
  return (share + vector_width - 1) / vector_width * vector_width;
}

/// Shared memory for the exchange of a row's sums across a cluster: two slots that successive
/// sums alternate between, so one cluster barrier a sum orders its writes before its reads, and
/// a slot's reads before its next write (two sums later, past the next sum's barrier).
constexpr int exchange_bytes(int cluster) { return cluster > 1 ? 2 * kSharedBytesPerWarp : 0; }

/// The backward's second kernel: threads per block, kParamGradCols neighbouring columns of
/// kParamGradSlices threads each (layer_norm_param_grad_kernel).
constexpr int kParamGradThreads = 256;
constexpr int kParamGradCols = 32;
constexpr int kParamGradSlices = kParamGradThreads / kParamGradCols;
/// Its shared memory: one float per thread, the slices' sums.
constexpr int kParamGradSharedBytes = kParamGradThreads * 4;

}  // namespace flashjit::layer_norm_space
