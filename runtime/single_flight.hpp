#pragma once
// A memo where each key is computed at most once at a time: the kernel caches use it so that,
// in one process, a key is compiled once however many threads ask, while hits on other keys
// never wait behind a compile (docs/cache.md).
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace flashjit::detail {

template <class Value>
class SingleFlight {
 public:
  /// What get() returns: the value, and whether this call computed it (false: it was in the
  /// memo, or another thread computed it while this one waited).
  struct Result {
    Value value;
    bool computed;
  };

  /// The value of `key` if the memo holds it; never waits for or starts a compute.
  std::optional<Value> find(const std::string& key) {
    std::lock_guard lock(mutex_);
    if (auto hit = done_.find(key); hit != done_.end()) return hit->second;
    return std::nullopt;
  }

  /// The value of `key`: from the memo; else, if another thread is computing it, that thread's
  /// result once it is ready; else `compute()`, run without the lock and then remembered. A
  /// compute that throws leaves nothing behind: its exception reaches every caller waiting on
  /// it, and the next call computes again.
  template <class Compute>
  Result get(const std::string& key, Compute&& compute) {
    std::promise<Value> promise;
    {
      std::unique_lock lock(mutex_);
      if (auto hit = done_.find(key); hit != done_.end()) return {hit->second, false};
      if (auto pending = in_flight_.find(key); pending != in_flight_.end()) {
        std::shared_future<Value> future = pending->second;
        lock.unlock();  // wait for the other thread without blocking other keys
        return {future.get(), false};
      }
      in_flight_.emplace(key, promise.get_future().share());
    }
    try {
      Value value = std::forward<Compute>(compute)();
      std::lock_guard lock(mutex_);
      done_.emplace(key, value);
      in_flight_.erase(key);
      promise.set_value(value);
      return {std::move(value), true};
    } catch (...) {
      std::lock_guard lock(mutex_);
      in_flight_.erase(key);
      promise.set_exception(std::current_exception());
      throw;
    }
  }

 private:
  std::mutex mutex_;  // guards the two maps; never held while computing
  std::map<std::string, Value> done_;
  std::map<std::string, std::shared_future<Value>> in_flight_;
};

}  // namespace flashjit::detail
