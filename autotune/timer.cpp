#include "autotune/timer.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "runtime/device_context.hpp"
#include "runtime/driver.hpp"

namespace flashjit::autotune {
namespace {

// One driver event, destroyed with its owner.
class Event {
 public:
  Event() { FLASHJIT_CU(cuEventCreate, &event_, CU_EVENT_DEFAULT); }
  ~Event() { detail::driver().cuEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

Timing summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  const double median = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  return {median, samples.front(), static_cast<int>(n)};
}

// Whether another timed run is due: at least min_runs, then while the budget lasts.
bool wants_another(const std::vector<double>& samples, double total_ms,
                   const TimingOptions& options) {
  const int runs = static_cast<int>(samples.size());
  if (runs >= options.max_runs) return false;
  return runs < options.min_runs || total_ms < options.budget_ms;
}

Timing time_on_gpu(detail::RuntimeBackend& backend, const std::function<void(Stream)>& launch,
                   const TimingOptions& options) {
  detail::DeviceContext& context = *backend.context();
  context.make_current();
  // Writing twice the L2's size evicts whatever the previous run left there, so each run reads
  // its inputs from DRAM like a call inside a real model would.
  const std::size_t flush_bytes =
      std::max<std::size_t>(2 * context.info().l2_bytes, std::size_t{64} << 20);
  DeviceBuffer flush = options.flush_l2 ? backend.allocate_buffer(flush_bytes) : DeviceBuffer{};
  const CUstream stream = nullptr;
  for (int i = 0; i < options.warmup_runs; ++i) launch(stream);
  backend.synchronize(stream);

  Event start, stop;
  std::vector<double> samples;
  double total_ms = 0;
  while (wants_another(samples, total_ms, options)) {
    if (flush.data() != nullptr) {
      FLASHJIT_CU(cuMemsetD8Async, reinterpret_cast<CUdeviceptr>(flush.data()),
                  static_cast<unsigned char>(samples.size()), flush_bytes, stream);
    }
    FLASHJIT_CU(cuEventRecord, start.get(), stream);
    launch(stream);
    FLASHJIT_CU(cuEventRecord, stop.get(), stream);
    FLASHJIT_CU(cuEventSynchronize, stop.get());
    float ms = 0;
    FLASHJIT_CU(cuEventElapsedTime, &ms, start.get(), stop.get());
    samples.push_back(ms);
    total_ms += ms;
  }
  return summarize(std::move(samples));
}

// The emulator runs each launch to completion on the calling thread: wall time is the time.
Timing time_on_emulator(detail::RuntimeBackend& backend, const std::function<void(Stream)>& launch,
                        const TimingOptions& options) {
  for (int i = 0; i < options.warmup_runs; ++i) launch(nullptr);
  std::vector<double> samples;
  double total_ms = 0;
  while (wants_another(samples, total_ms, options)) {
    const auto begin = std::chrono::steady_clock::now();
    launch(nullptr);
    backend.synchronize(nullptr);
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - begin;
    samples.push_back(elapsed.count());
    total_ms += elapsed.count();
  }
  return summarize(std::move(samples));
}

}  // namespace

Timing time_launches(detail::RuntimeBackend& backend, const std::function<void(Stream)>& launch,
                     const TimingOptions& options) {
  return backend.kind() == Backend::cuda ? time_on_gpu(backend, launch, options)
                                         : time_on_emulator(backend, launch, options);
}

}  // namespace flashjit::autotune
