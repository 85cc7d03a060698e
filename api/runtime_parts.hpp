#pragma once
// The parts a public Runtime is made of, for the ops' calls (ops/<op>/<op>_api.cpp) and for
// flashjit's own code above the facade (the `flashjit` command, the tests) that launches kernels
// or tunes directly. Users do not need it:
// the public header keeps these parts behind a pointer.
#include "autotune/tuning_state.hpp"
#include "flashjit/runtime.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::detail {

/// Reaches a Runtime's parts (a friend of Runtime).
struct RuntimeParts {
  /// Where `runtime` allocates and launches: its executor, device and memory.
  static RuntimeBackend& backend(Runtime& runtime);
  /// `runtime`'s tuning policy and database view; the kernels' config choice.
  static autotune::TuningState& tuning(Runtime& runtime);
  /// Whether `runtime` checks inference calls' index arrays before a launch
  /// (RuntimeOptions::check_indices).
  static bool check_indices(const Runtime& runtime);
};

/// RuntimeParts::backend.
inline RuntimeBackend& backend_of(Runtime& runtime) { return RuntimeParts::backend(runtime); }
/// RuntimeParts::tuning.
inline autotune::TuningState& tuning_of(Runtime& runtime) { return RuntimeParts::tuning(runtime); }

}  // namespace flashjit::detail
