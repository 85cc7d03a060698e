#pragma once
// A bounded worker pool for independent jobs whose results are consumed in order (NVRTC
// compiles take hundreds of MB each, so the number in flight must be capped).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <future>
#include <thread>
#include <vector>

namespace flashjit::detail {

/// Bytes one NVRTC compile may hold at its peak: a Hopper attention kernel's few hundred MB,
/// with room to spare.
inline constexpr long long kCompileBytes = 1LL << 30;

/// The pool size for `threads` hardware threads and `memory_bytes` of memory (0: unknown):
/// a worker a thread, as many as the memory holds compiles, at most `cap`, at least 1.
constexpr int workers_for(int threads, long long memory_bytes, int cap) {
  const long long by_memory = memory_bytes > 0 ? memory_bytes / kCompileBytes : cap;
  const long long workers = std::min<long long>({threads, by_memory, cap});
  return workers < 1 ? 1 : static_cast<int>(workers);
}

/// The default pool size on this machine: its hardware threads (a 16-core GPU host compiles
/// 16 kernels at once, a 2-core one 2), as far as its memory holds them, at most `cap`.
inline int default_workers(int cap = 64) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  const long long memory =
      pages > 0 && page_size > 0 ? static_cast<long long>(pages) * page_size : 0;
  return workers_for(static_cast<int>(std::thread::hardware_concurrency()), memory, cap);
}

/// Runs job(i) for i in [0, count) on at most `workers` threads and calls consume(i, result)
/// on the calling thread in index order as results become available. An exception thrown by
/// a job is delivered to consume as a std::exception_ptr-carrying result (see Outcome).
template <typename Result>
struct Outcome {
  Result value{};
  std::exception_ptr error;
};

/// One worker (or one job) runs on the calling thread: a thread would cost more than a job
/// that finds its kernel in the cache.
template <typename Result>
void run_ordered(int count, int workers, const std::function<Result(int)>& job,
                 const std::function<void(int, Outcome<Result>&)>& consume) {
  auto outcome_of = [&](int i) {
    Outcome<Result> outcome;
    try {
      outcome.value = job(i);
    } catch (...) {
      outcome.error = std::current_exception();
    }
    return outcome;
  };
  if (std::min(workers, count) <= 1) {
    for (int i = 0; i < count; ++i) {
      Outcome<Result> outcome = outcome_of(i);
      consume(i, outcome);
    }
    return;
  }
  std::vector<std::promise<Outcome<Result>>> promises(static_cast<std::size_t>(count));
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next++; i < count; i = next++) {
      promises[static_cast<std::size_t>(i)].set_value(outcome_of(i));
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < std::min(workers, count); ++w) threads.emplace_back(work);
  for (int i = 0; i < count; ++i) {
    Outcome<Result> outcome = promises[static_cast<std::size_t>(i)].get_future().get();
    consume(i, outcome);
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace flashjit::detail
