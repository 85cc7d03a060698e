#pragma once
// The layer_norm op's configuration space and validity predicate, shared by the forward and
// the backward. The host includes this file to enumerate and check configs; the kernels
// static_assert the same predicate, so an illegal config is dropped before any compile.
namespace flashjit::layer_norm_space {

/// Row-length buckets: a config with max_cols > 0 handles rows of at most that many columns and
/// keeps its share of the row in registers (one read); max_cols == 0 handles any length up to
/// kMaxCols, reading the row twice.
constexpr int kMaxColsBuckets[] = {256, 1024, 4096, 0};
/// Threads that share one row (whole warps; a block of fewer than kMinBlockThreads takes
/// further rows).
constexpr int kThreadsPerRow[] = {32, 128, 512};
/// Neighbouring columns each thread takes per step: lane l reads columns l·v .. l·v + v − 1 of
/// each chunk of threads·v, so a warp's loads stay contiguous.
constexpr int kVectorWidths[] = {1, 4};
/// Register budget: above this many cached values per thread the kernel would spill.
constexpr int kMaxValuesPerThread = 16;
/// Threads per block: rows are packed into blocks of at least this many threads.
constexpr int kMinBlockThreads = 128;
/// The longest row the op accepts (fp32 counts are exact far beyond it).
constexpr int kMaxCols = 65536;
/// Bytes of shared memory per warp of a row for the cross-warp merge (three floats of
/// statistics forward, two sums backward, padded).
constexpr int kSharedBytesPerWarp = 16;

constexpr bool threads_valid(int threads_per_row) {
  return threads_per_row >= 32 && threads_per_row <= 1024 && threads_per_row % 32 == 0;
}

constexpr bool config_valid(int max_cols, int threads_per_row, int vector_width) {
  if (!threads_valid(threads_per_row)) return false;
  if (vector_width != 1 && vector_width != 2 && vector_width != 4) return false;
  if (max_cols == 0) return true;
  const int step = threads_per_row * vector_width;
  return max_cols > 0 && max_cols % step == 0 && max_cols / threads_per_row <= kMaxValuesPerThread;
}

constexpr int rows_per_block(int threads_per_row) {
  return threads_per_row >= kMinBlockThreads ? 1 : kMinBlockThreads / threads_per_row;
}

/// Dynamic shared memory: one slot per warp of a row; none when a row fits in one warp.
constexpr int shared_bytes(int threads_per_row) {
  const int warps_per_row = threads_per_row / 32;
  return warps_per_row > 1 ? rows_per_block(threads_per_row) * warps_per_row * kSharedBytesPerWarp
                           : 0;
}

/// The backward's second kernel: threads per block, one column each.
constexpr int kParamGradThreads = 256;
/// The backward's row slots (rows summed in a fixed order into one partial of dγ, dβ, dbias
/// each): at most this many, and at most kWorkspaceFloats / (3 · cols) of them.
constexpr int kMaxSlots = 256;
constexpr long long kWorkspaceFloats = 1ll << 24;  // 64 MiB of fp32 partials at most

}  // namespace flashjit::layer_norm_space
