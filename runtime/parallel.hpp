#pragma once
// A bounded worker pool for independent jobs whose results are consumed in order (NVRTC
// compiles take hundreds of MB each, so the number in flight must be capped).
#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <future>
#include <thread>
#include <vector>

namespace flashjit::detail {

/// A sensible default pool size: the hardware threads, at most `cap`, at least 1.
inline int default_workers(int cap = 4) {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, cap);
}

/// Runs job(i) for i in [0, count) on at most `workers` threads and calls consume(i, result)
/// on the calling thread in index order as results become available. An exception thrown by
/// a job is delivered to consume as a std::exception_ptr-carrying result (see Outcome).
template <typename Result>
struct Outcome {
  Result value{};
  std::exception_ptr error;
};

template <typename Result>
void run_ordered(int count, int workers, const std::function<Result(int)>& job,
                 const std::function<void(int, Outcome<Result>&)>& consume) {
  std::vector<std::promise<Outcome<Result>>> promises(static_cast<std::size_t>(count));
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next++; i < count; i = next++) {
      Outcome<Result> outcome;
      try {
        outcome.value = job(i);
      } catch (...) {
        outcome.error = std::current_exception();
      }
      promises[static_cast<std::size_t>(i)].set_value(std::move(outcome));
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
