#pragma once
// How a Runtime chooses the kernel config of each call (docs/autotuning.md).

namespace flashjit {

/// How forward() and backward() pick a kernel config for a call (docs/autotuning.md).
enum class TuningPolicy {
  off,        ///< the heuristic default; the tuning database is not read
  cached,     ///< the tuning database's winner for the call's shape, else the heuristic default
  automatic,  ///< as cached, but a shape the database lacks is tuned first and persisted
};

}  // namespace flashjit
