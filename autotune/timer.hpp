#pragma once
// Timing kernel launches the way the autotuner and `flashjit bench` do (docs/autotuning.md):
// warm-up, then the median of repeated runs within a time budget, with L2 flushed before each
// run so that every run starts from DRAM as a real call would.
#include <functional>

#include "flashjit/device.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::autotune {

/// How long and how often to time.
struct TimingOptions {
  int warmup_runs = 3;     ///< untimed runs first (caches, clocks, lazy loading)
  int min_runs = 5;        ///< timed runs at least, whatever the budget
  int max_runs = 100;      ///< timed runs at most
  double budget_ms = 250;  ///< stop adding timed runs once their total passes this
  bool flush_l2 = true;    ///< overwrite a buffer larger than L2 before each timed run
};

/// The outcome of timing one launch sequence.
struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  int runs = 0;
};

/// Times `launch`, which enqueues one call (any number of kernels) on the stream it is given.
/// On the cuda backend each run is bracketed by driver events on a stream of `backend`'s
/// device and only the GPU time between them counts; the L2 flush is enqueued before the start
/// event. On the emulator, launches are synchronous and wall-clock time is measured (useful to
/// test the tuner, not to compare with a GPU). Exceptions from `launch` propagate.
Timing time_launches(detail::RuntimeBackend& backend, const std::function<void(Stream)>& launch,
                     const TimingOptions& options = {});

}  // namespace flashjit::autotune
