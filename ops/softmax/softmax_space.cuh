#pragma once
// The softmax op's configuration space and validity predicate. The host includes this file to
// enumerate and check configs; the kernel static_asserts the same predicate, so an illegal
// config is dropped before any compile.
namespace flashjit::softmax_space {

/// Row-length buckets: a config with max_cols > 0 handles rows of at most that many columns and
/// keeps them in registers (one read); max_cols == 0 handles any length, reading a row twice.
constexpr int kMaxColsBuckets[] = {128, 512, 2048, 8192, 0};
/// Threads that share one row (whole warps; the rest of the block takes further rows).
constexpr int kThreadsPerRow[] = {32, 128, 512};
/// Register budget: above this many cached values per thread the kernel would spill.
constexpr int kMaxValuesPerThread = 16;
/// Threads per block: rows are packed into blocks of at least this many threads.
constexpr int kMinBlockThreads = 128;

constexpr bool threads_valid(int threads_per_row) {
  return threads_per_row >= 32 && threads_per_row <= 1024 && threads_per_row % 32 == 0;
}

constexpr bool config_valid(int max_cols, int threads_per_row) {
  if (!threads_valid(threads_per_row)) return false;
  if (max_cols == 0) return true;
  return max_cols > 0 && max_cols % threads_per_row == 0 &&
         max_cols / threads_per_row <= kMaxValuesPerThread;
}

constexpr int rows_per_block(int threads_per_row) {
  return threads_per_row >= kMinBlockThreads ? 1 : kMinBlockThreads / threads_per_row;
}

/// Dynamic shared memory: one (max, sum) pair of floats per warp for the cross-warp merge;
/// none when a row fits in one warp.
constexpr int shared_bytes(int threads_per_row) {
  const int warps_per_row = threads_per_row / 32;
  return warps_per_row > 1 ? rows_per_block(threads_per_row) * warps_per_row * 2 * 4 : 0;
}

}  // namespace flashjit::softmax_space
