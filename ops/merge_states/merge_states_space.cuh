#pragma once
// The merge_states op's configuration space and validity predicate. The host includes this file
// to enumerate and check configs; the kernel static_asserts the same predicate, so an illegal
// config is dropped before any compile.
namespace flashjit::merge_states_space {

/// Threads that share one (token, head) row, splitting its head_dim columns (a divisor of the
/// block, so rows pack whole into it).
constexpr int kThreadsPerRow[] = {8, 16, 32};
/// Columns each thread reads per partial and step: loads in flight per thread. A thread takes
/// columns lane, lane + threads, ... so the lanes of a row read neighbouring elements.
constexpr int kColumnsPerThread[] = {1, 2, 4};
/// Threads per block; the rows of a block share nothing but the barrier of the in-place form.
constexpr int kBlockThreads = 128;
/// The head dims the op accepts: the kernel loops over columns, so any width up to this works.
constexpr int kMaxHeadDim = 1024;

constexpr bool config_valid(int threads_per_row, int columns_per_thread) {
  const bool threads_ok =
      threads_per_row >= 1 && threads_per_row <= 32 && kBlockThreads % threads_per_row == 0;
  const bool columns_ok =
      columns_per_thread == 1 || columns_per_thread == 2 || columns_per_thread == 4;
  return threads_ok && columns_ok;
}

constexpr int rows_per_block(int threads_per_row) { return kBlockThreads / threads_per_row; }

}  // namespace flashjit::merge_states_space
